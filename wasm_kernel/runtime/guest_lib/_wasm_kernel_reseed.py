"""Fresh randomness for every sandbox made from one warm image.

The random generators that exist when the image is built (random's, numpy's global
one, any a preloaded library made) were seeded at import; the image holds them as
they were then, so every sandbox started from it would draw the same numbers. Each
sandbox reseeds them from its own entropy (WASI random_get) before any cell runs.
"""

import os
import sys

seeded_generators = []  # found as the image is built, reseeded as each sandbox starts


def find_seeded_generators():
    import gc
    import random

    kinds = [random.Random]
    np = sys.modules.get("numpy")
    if np is not None:
        kinds += [np.random.RandomState, np.random.Generator]
    kinds = tuple(kinds)
    # SystemRandom draws from the OS each time: it has no state to share.
    seeded_generators[:] = [
        obj for obj in gc.get_objects() if isinstance(obj, kinds) and not isinstance(obj, random.SystemRandom)
    ]


def reseed():
    """Fresh entropy for every generator, in fixed-size arrays: seeding from a Python
    int (numpy's default) allocates as many digits as the entropy happens to need,
    which shifts the heap and makes the same cell cost different fuel in two
    sandboxes."""
    import random
    import tempfile

    tempfile._name_sequence = None  # made again, from the reseeded entropy, on first use
    np = sys.modules.get("numpy")
    for gen in seeded_generators:
        if isinstance(gen, random.Random):
            gen.seed()  # C's own path: 624 words from os.urandom
        elif np is not None and isinstance(gen, np.random.RandomState):
            gen.seed(np.frombuffer(os.urandom(624 * 4), dtype=np.uint32))
        elif np is not None and isinstance(gen, np.random.Generator):
            bits = gen.bit_generator
            bits.state = type(bits)(np.frombuffer(os.urandom(32), dtype=np.uint32)).state
