"""JAX psum across the GPUs of one machine, one process (jax.pmap): XLA loads NCCL itself
and calls it through dlsym on its handle, so only LD_AUDIT (or the drop-in folder) brings
libnccl-car.so in. Run by tests/e2e/run_e2e.py (scenario multi-gpu-jax) as

    tools/nccl-car run -- python3 tests/e2e/jax_psum.py

(the tool picks --mode audit because this script imports jax). psum of float32, bfloat16
and float16 from 16 KiB to 12 MiB per device (above 8 MiB: forwarded), each 5 times.
Device d holds (i * 7 + d * 3) % 17 - 8 at element i: small integers, so every sum is exact
in every type and order. Prints "jax psum N devices: PASS (...)"; exit 1 on a wrong
element, 77 with fewer than 2 GPUs."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

SIZES = [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20, 12 << 20]
REPEATS = 5


def main():
    devices = jax.local_device_count()
    if devices < 2 or jax.default_backend() != "gpu":
        print(f"jax psum: SKIP ({devices} {jax.default_backend()} device(s); needs 2 GPUs)")
        return 77
    psum = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")
    checks, wrong = 0, 0
    for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
        for nbytes in SIZES:
            count = nbytes // jnp.dtype(dtype).itemsize
            index = np.arange(count)
            inputs = np.stack([(index * 7 + d * 3) % 17 - 8 for d in range(devices)]).astype(np.float32)
            expected = inputs.sum(axis=0)
            x = jax.pmap(lambda v: v)(jnp.asarray(inputs, dtype=dtype))  # row d on device d
            for _ in range(REPEATS):
                out = np.asarray(psum(x).astype(jnp.float32))
                checks += 1
                bad = np.nonzero((out != expected[None, :]).any(axis=0))[0]
                if bad.size:
                    wrong += 1
                    print(f"WRONG {jnp.dtype(dtype).name} {nbytes} bytes: {bad.size} elements, first {bad[0]}",
                          file=sys.stderr)
    status = "PASS" if wrong == 0 else "FAIL"
    print(f"jax psum {devices} devices: {status} ({checks} checks, {wrong} wrong; jax {jax.__version__})",
          flush=True)
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
