"""Compatibility reference for JAX + optax through stepscope's API (`stepscope.steps`, `region`, `log`): JAX has
no hook points for zero code. tests/compat/test_compat.py checks the stored counts against the arguments.

    jax_ref.py --epochs 2 --samples 200 --batch 32 --features 16 --hidden 32
"""

import argparse
from collections.abc import Iterator

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    args = p.parse_args()

    import jax
    import jax.numpy as jnp
    import optax

    import stepscope

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.samples, args.features)).astype("float32")
    y = (x @ rng.normal(size=(args.features, 1))).astype("float32")
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    params = {"w1": jax.random.normal(k1, (args.features, args.hidden)) * 0.1, "b1": jnp.zeros(args.hidden),
              "w2": jax.random.normal(k2, (args.hidden, 1)) * 0.1, "b2": jnp.zeros(1)}
    opt = optax.adam(1e-3)
    opt_state = opt.init(params)

    def loss_fn(params, xb, yb):  # type: ignore[no-untyped-def]
        h = jax.nn.relu(xb @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w2"] + params["b2"] - yb) ** 2)

    @jax.jit
    def train_step(params, opt_state, xb, yb):  # type: ignore[no-untyped-def]
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(0, args.samples, args.batch):
            yield x[i:i + args.batch], y[i:i + args.batch]

    for _epoch in range(args.epochs):
        for xb, yb in stepscope.steps(batches()):
            with stepscope.region("train_step"):
                params, opt_state, loss = train_step(params, opt_state, xb, yb)
                jax.block_until_ready(loss)  # type: ignore[no-untyped-call]
            stepscope.log(loss=float(loss))


if __name__ == "__main__":
    main()
