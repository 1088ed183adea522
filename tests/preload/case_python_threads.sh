# Python with threads, a fork()ing multiprocessing pool started while threads
# run, and extension modules loaded at run time (dlopen).
export PYTHONHASHSEED=0
exec python3 "$SRC/python_threads.py"
