# Coreutils pipelines: sort (multithreaded, spilling to temporary files),
# uniq, awk, sed, tr, gzip, each process under the allocator.
set -eo pipefail
awk 'BEGIN { x = 42; for (i = 0; i < 300000; i++) { x = (x * 1103515245 + 12345) % 2147483648;
       printf "w%d,%d,%s\n", x % 3000, x % 1000003, substr("abcdefghijklmnop", 1 + x % 16) } }' >data.csv
sort -t, -k1,1 data.csv | cut -d, -f1 | uniq -c | sort -n | tail -n 5
sort --parallel=2 -S 2M -T . -t, -k2,2n -k1,1 data.csv | sha256sum
sed 's/,/ /g' data.csv | tr 'a-p' 'A-P' | rev | awk '{ n[$1]++ } END { for (k in n) print k, n[k] }' | sort | sha256sum
gzip -c data.csv | gunzip | cmp - data.csv && echo "gzip round trip ok"
wc -l <data.csv
