"""Which OpenBLAS this PyTorch loaded. Its best CPU setup is Debian's OpenMP build (libopenblas0-openmp, picked
with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp). A path that does not exist is ignored without a
word, and the pthread build then keeps a thread pool of its own beside PyTorch's OpenMP one: on a 2-core Zen 4 the
LM's 2-thread float32 step (torch_lm_train.py --threads 2) took 884-1,064 ms that way against 379-438 ms with the
OpenMP build. A comparison run like that would flatter stepformer, so the scripts that time PyTorch say so on
stderr."""
import sys


def warn_unless_openmp_openblas():
    """Prints a warning to stderr when the OpenBLAS mapped into this process is not the OpenMP build."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libopenblas" in line}
    if paths and not any("openblas-openmp" in p for p in paths):
        print("warning: PyTorch runs on " + ", ".join(sorted(paths)) + ", not the OpenMP OpenBLAS; for its best CPU "
              "setup install libopenblas0-openmp and set LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp",
              file=sys.stderr)
