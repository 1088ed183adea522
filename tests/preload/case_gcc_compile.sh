# GCC (cc1, as, collect2, ld) and G++ (cc1plus) under the allocator: the
# objects must be byte-identical and the programs must print the same output.
set -e
cp "$SRC/sample_program.c" "$SRC/sample_program.cpp" .
gcc -O2 -g -frandom-seed=tenon -c sample_program.c -o c.o
g++ -std=c++17 -O2 -g -frandom-seed=tenon -c sample_program.cpp -o cpp.o
sha256sum c.o cpp.o
gcc c.o -o c_prog
g++ cpp.o -o cpp_prog
./c_prog
./cpp_prog
