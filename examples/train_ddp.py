"""A tiny DDP training run on CPU (gloo) for trying nsyswrap; start it with torchrun:

    nsyswrap launch --annotate modules,collectives,steps --out runs/demo -- \
        torchrun --nproc-per-node 2 examples/train_ddp.py --steps 4

It knows nothing about nsyswrap unless --mark-steps is given; then it marks its steps and
phases itself with nsyswrap.step and nsyswrap.phase. --mark-phases marks only the phases
(data_loading, forward, backward, optimizer), leaving the steps to `--annotate steps`.
`--slow 2:20:40:30` makes rank 2's data loading 30 ms slower in steps 20 to 39 (a
straggler to find, e.g. with `nsyswrap launch --sample`).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 2 * width), nn.ReLU(inplace=True), nn.Linear(2 * width, width)
        )

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class TinyNet(nn.Module):
    def __init__(self, width: int = 32, depth: int = 2):
        super().__init__()
        self.layers = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument(
        "--mark-steps", action="store_true", help="mark steps and phases with nsyswrap"
    )
    parser.add_argument("--mark-phases", action="store_true", help="mark only the phases (NVTX)")
    parser.add_argument(
        "--slow",
        metavar="RANK:FROM:TO:MS",
        default="",
        help="make RANK's data loading MS ms slower in steps FROM to TO-1",
    )
    args = parser.parse_args()
    slow_rank, slow_from, slow_to, slow_ms = (
        map(int, args.slow.split(":")) if args.slow else (-1, 0, 0, 0)
    )

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(TinyNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step, phase = _markers(args.mark_steps, args.mark_phases)
    generator = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(args.steps * args.batch, 32, generator=generator)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    batches = iter(torch.utils.data.DataLoader(data, batch_size=args.batch))
    for i in range(args.steps):
        with step(i):
            with phase("data_loading"):
                x, y = next(batches)
                if dist.get_rank() == slow_rank and slow_from <= i < slow_to:
                    time.sleep(slow_ms / 1000)
            with phase("forward"):
                loss = nn.functional.mse_loss(model(x), y)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad()
        if dist.get_rank() == 0:
            print(f"step {i}: loss {loss.item():.4f}", flush=True)
    # Every rank finishes its last all-reduce and drops DDP before the group goes away. Then
    # the main thread lets go of the GIL a moment: gloo's run-loop thread drops its last
    # reference to the barrier's work after the barrier returns, and that destructor takes the
    # GIL; if the interpreter is already exiting then, the thread is ended inside it and the
    # process aborts ("terminate called without an active exception", exit code 134, about one
    # run in five here). DDP keeps the group alive past destroy_process_group, so its threads
    # are not joined there.
    dist.barrier()
    del model, optimizer
    dist.destroy_process_group()
    time.sleep(0.1)


def _markers(steps: bool, phases: bool):
    nothing = lambda _: contextlib.nullcontext()  # noqa: E731
    if not (steps or phases):
        return nothing, nothing
    import nsyswrap

    return (nsyswrap.step if steps else nothing), nsyswrap.phase


if __name__ == "__main__":
    main()
