"""Password hashing sized for a shift start: twenty people logging in at once.

Django's PBKDF2 (over a million iterations) costs about 340 ms of CPU per login
here; twenty at once held every page up for seconds. Argon2id at OWASP's
second recommended setting (19 MiB, 2 passes, 1 lane) costs about 70 ms and is
memory-hard, which is what slows an attacker with GPUs. The parameters are
stored in each hash, so changing them (ARGON2_TIME_COST, ARGON2_MEMORY_KIB)
rehashes each password at its owner's next login. See docs/benchmarks.md.
"""

from django.conf import settings
from django.contrib.auth.hashers import Argon2PasswordHasher


class StudioArgon2PasswordHasher(Argon2PasswordHasher):
    # The same "argon2" algorithm as Django's; only the cost differs.
    time_cost = settings.ARGON2_TIME_COST
    memory_cost = settings.ARGON2_MEMORY_KIB
    parallelism = 1
