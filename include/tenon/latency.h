/* <tenon/latency.h>: the latency layer's report, on request.
 *
 * In a program running under libtenon-latency.so or libtenon-trace.so (or
 * any composition with tenon::latency), prints the sampled latency
 * percentiles of every operation so far (p50 ... p99.9999 and max, in ns and
 * cycles) to stderr. Declared weak: a program that may run without such a
 * library checks the address first:
 *
 *   if (tenon_latency_print) tenon_latency_print();
 *
 * The same report is printed at exit when the environment has TENON_LATENCY=1
 * (docs/measure.md).
 */
#ifndef TENON_LATENCY_H
#define TENON_LATENCY_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
__attribute__((weak, visibility("default"))) void tenon_latency_print(void);
#else
void tenon_latency_print(void);
#endif

#ifdef __cplusplus
}
#endif
#endif /* TENON_LATENCY_H */
