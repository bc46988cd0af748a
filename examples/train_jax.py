"""A JAX + optax training loop observed through stepscope's API (JAX has no hook points for zero code).

    stepscope run -- python examples/train_jax.py --epochs 2

``stepscope.steps(batches)`` makes each batch one step (fetching it is data wait), ``stepscope.region``
times the parts of a step and ``stepscope.log`` records the loss. JAX dispatches work asynchronously: a
jitted call returns before the device has finished, so every region ends with ``jax.block_until_ready``
on what it produced, else the region times only the dispatch and the wait lands in whatever blocks next.
Without `stepscope run` the same script records a run of its own (``stepscope.session``).
"""

import argparse
import time

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--samples", type=int, default=1024)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--fetch-sleep", type=float, default=0.0, help="seconds each batch takes to load")
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

    def loss_fn(params, xb, yb):
        h = jax.nn.relu(xb @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w2"] + params["b2"] - yb) ** 2)

    @jax.jit
    def train_step(params, opt_state, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def batches():
        for i in range(0, args.samples, args.batch_size):
            if args.fetch_sleep:
                time.sleep(args.fetch_sleep)
            yield x[i:i + args.batch_size], y[i:i + args.batch_size]

    # No name / params here: under `stepscope run` the launcher names the run (--name, --param) and would
    # warn that they are ignored; run without it, the script records a run of its own named after the command.
    with stepscope.session():
        for _epoch in range(args.epochs):
            for xb, yb in stepscope.steps(batches()):
                with stepscope.region("train_step"):
                    params, opt_state, loss = train_step(params, opt_state, xb, yb)
                    jax.block_until_ready(loss)  # the region ends when the step's work has
                stepscope.log(loss=float(loss))


if __name__ == "__main__":
    main()
