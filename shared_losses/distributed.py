"""Negatives across processes (docs/equations.md section 6).

With data-parallel training the candidates of an anchor are the views of the *global* batch.
:func:`gather_with_grad` concatenates a tensor from every process along dim 0 while keeping the
autograd graph: its backward sums the gradients that every process's loss puts on each slice and
hands each process its own slice. (We use our own autograd function rather than
``torch.distributed.nn.functional.all_gather``, which is deprecated and, on gloo, returned wrong
gradients for non-contiguous incoming gradients in our tests.) Each process then computes the loss of its *local*
anchors against the global candidates, averaged over its local anchors. Under DDP / accelerate,
which average parameter gradients over processes, this gives exactly the gradient of
single-process training on the concatenated batch (tested with two gloo processes). That holds for
``reduction="mean"``: with ``"sum"`` each process sums over its local anchors and the averaging
divides the single-process gradient of the summed loss by the number of processes.

All processes must contribute the same number of rows (``all_gather`` needs equal shapes): the shapes are gathered
first (one small collective and one read on the host per call), and unequal ones are refused on every process in
one ValueError naming them, where they gave a loss partly computed from uninitialised memory on one process and a
failure inside the backend on another (a last, smaller batch: ``DataLoader(drop_last=True)``).

:func:`check_launch` refuses, in one line naming the command that works, a launch that asked for several
processes but gave the run one (``accelerate launch --cpu --num_processes N`` starts a single process;
docs/clusters.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from typing import Any, Mapping, Sequence

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    """Whether a torch.distributed group of more than one process is up."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_with_grad(t: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """Concatenate ``t`` from every process along dim 0.

    Returns ``(gathered, rank, world_size)``; without an initialised process group of more than
    one process, ``(t, 0, 1)``. Floating tensors keep gradients; integer tensors (labels, ids) are
    gathered without.
    """
    if not is_distributed():
        return t, 0, 1
    world, rank = dist.get_world_size(), dist.get_rank()
    check_equal_shapes(t, world)
    if t.is_floating_point() and t.requires_grad:
        return _AllGatherCat.apply(t), rank, world
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=0), rank, world


def check_equal_shapes(t: torch.Tensor, world: int) -> None:
    """Refuse, on every process alike, tensors of unequal shapes across the ``world`` processes (what
    ``all_gather`` cannot gather): a ValueError naming each process's shape."""
    mine = torch.tensor([t.dim(), *t.shape, *[0] * (8 - t.dim())], dtype=torch.long, device=t.device)
    shapes = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(shapes, mine)
    seen = [tuple(s[1:1 + int(s[0])].tolist()) for s in shapes]
    if len(set(seen)) > 1:
        said = ", ".join(f"process {r}: {list(shape)}" for r, shape in enumerate(seen))
        raise ValueError(f"the loss gathers its rows from every process, and they must have equal shapes ({said}): "
                         "make every process's batch the same size (a last, smaller batch: DataLoader(drop_last=True)"
                         ") or compute the loss without gathering (gather_distributed=False)")


class _AllGatherCat(torch.autograd.Function):
    """Forward: all_gather + cat along dim 0. Backward: sum the incoming gradient over processes
    (all_reduce) and return this process's slice."""

    @staticmethod
    def forward(ctx, t):
        world, rank = dist.get_world_size(), dist.get_rank()
        parts = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(parts, t.contiguous())
        ctx.rank, ctx.n = rank, t.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.n : (ctx.rank + 1) * ctx.n]


# ------------------------------------------------------------------------ a launch that silently runs one process

# What `accelerate launch` (1.15) does with several CPU processes, measured on a CPU-only machine:
#   --cpu --num_processes N          one process (its "simple" launcher: several CPU processes only under mpirun,
#                                    --mpirun_hostfile); it exports ACCELERATE_USE_CPU=True, ACCELERATE_MIXED_PRECISION
#                                    and, because N > 1, MASTER_ADDR / MASTER_PORT, but no WORLD_SIZE / RANK
#   a config file of distributed_type MULTI_CPU: the same simple launcher, one process
#   --multi_gpu --cpu                refused by accelerate ("You can only use one of `--cpu`, `--multi_gpu` ...")
#   --multi_gpu --num_processes N    N processes (torchrun inside: WORLD_SIZE, RANK, LOCAL_RANK); accelerate uses them
#                                    on the CPU with gloo only if told to use the CPU (Accelerator(cpu=True), i.e. our
#                                    trainers' --device cpu, or ACCELERATE_USE_CPU=true); otherwise, without a GPU, each
#                                    process runs alone (num_processes 1) beside a torch.distributed group of N
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_TRUE = ("y", "yes", "t", "true", "on", "1")
_PARENT = object()  # launch_problem's default: read the launcher's command line from /proc


def check_launch(num_processes: int, *, module: str | None = None, cpu_option: str | None = "--device cpu",
                 environ: Mapping[str, str] | None = None, launcher_argv: Any = _PARENT) -> None:
    """Refuse, with a ValueError of one line naming the command that works, a launch that asked for several
    processes but gave this run one (see :func:`launch_problem`). Call it on every process once the Accelerator
    exists, with ``accelerator.num_processes``; ``module`` (``"nlp_qt.train"``; default: the launched program, or
    this process's ``-m`` module or script) and ``cpu_option`` (the program's option that makes accelerate use the
    CPU; None: the environment variable ACCELERATE_USE_CPU=true) spell the command in the message."""
    problem = launch_problem(num_processes, module=module, cpu_option=cpu_option, environ=environ,
                             launcher_argv=launcher_argv)
    if problem is not None:
        raise ValueError(problem)


def launch_problem(num_processes: int, *, module: str | None = None, cpu_option: str | None = "--device cpu",
                   environ: Mapping[str, str] | None = None, launcher_argv: Any = _PARENT) -> str | None:
    """The one-line refusal of a launch that asked for several processes while this run has ``num_processes``
    == 1, else None. Two such launches:

    * accelerate's simple launcher (``accelerate launch --cpu --num_processes N``, or a MULTI_CPU config file,
      without mpirun) starts one process. It sets ACCELERATE_USE_CPU and ACCELERATE_MIXED_PRECISION, and
      MASTER_ADDR / MASTER_PORT only when asked for more than one process or machine, and no WORLD_SIZE /
      RANK. Where the launcher's command line can be read (``launcher_argv``: by default the parent process's,
      from /proc; None: unknown), it must be an ``accelerate launch`` asking for more than one process (so that
      MASTER_ADDR / MASTER_PORT exported by hand before a one-process launch are not taken for a request).
    * N processes were started (WORLD_SIZE, or MPI's size variable, above 1) but accelerate runs this one alone:
      ``accelerate launch --multi_gpu`` or ``torchrun`` on a machine without a GPU, without telling accelerate
      to use the CPU.
    """
    if num_processes > 1:
        return None
    env = os.environ if environ is None else environ
    world = _world_size(env)
    if world > 1:
        var = next(v for v in WORLD_SIZE_VARIABLES if _int(env.get(v)) > 1)
        how = cpu_option or "ACCELERATE_USE_CPU=true"
        return (f"this process is one of {world} ({var}={world}) but accelerate runs it as a single process: it was "
                f"not told to use the CPU, so it made no process group of its own (accelerate launch --multi_gpu or "
                f"torchrun on a machine without a GPU needs {how}); for {world} CPU processes use: "
                f"{_working_commands(world, module, cpu_option, None)}")
    if not _simple_launch(env):
        return None
    argv = _parent_argv() if launcher_argv is _PARENT else launcher_argv
    launch = None
    if argv is not None:
        launch = _parse_accelerate_launch(argv)
        if launch is None:  # the launcher is no `accelerate launch`: the variables were inherited or set by hand
            return None
        requested = launch.num_processes if launch.num_processes is not None else _config_processes(launch)
        if (requested is None or requested <= 1) and (launch.num_machines or 1) <= 1:
            return None
    else:
        requested = None
    import accelerate

    asked = _spell_launch(launch, env)
    return (f"`{asked}` started a single process: accelerate {accelerate.__version__} runs several CPU processes "
            f"only under mpirun (--mpirun_hostfile), otherwise its --cpu / MULTI_CPU launch runs one; for "
            f"{requested or 'N'} CPU processes use: {_working_commands(requested, module, cpu_option, launch)}")


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _world_size(env: Mapping[str, str]) -> int:
    return max(_int(env.get(v)) for v in WORLD_SIZE_VARIABLES)


def _simple_launch(env: Mapping[str, str]) -> bool:
    """Whether the environment is that of accelerate's simple launcher asked for several processes: its own
    variables, MASTER_ADDR / MASTER_PORT, and no process rank of any launcher."""
    return ("ACCELERATE_USE_CPU" in env and "ACCELERATE_MIXED_PRECISION" in env and "MASTER_ADDR" in env
            and "MASTER_PORT" in env and _world_size(env) <= 1
            and not any(v in env for v in ("RANK", "LOCAL_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK")))


def _parent_argv() -> list[str] | None:
    """The parent process's command line (Linux's /proc), or None where it cannot be read."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    argv = [a.decode(errors="replace") for a in raw.split(b"\0")]
    while argv and argv[-1] == "":
        argv.pop()
    return argv or None


def _parse_accelerate_launch(argv: Sequence[str]) -> argparse.Namespace | None:
    """``argv`` parsed as accelerate's launcher parses it, if it is an ``accelerate launch`` command line
    (``accelerate launch ...``, ``python -m accelerate.commands.launch ...``,
    ``python -m accelerate.commands.accelerate_cli launch ...``); else None."""
    rest = None
    for i, arg in enumerate(argv):
        name = os.path.basename(arg)
        if name in ("accelerate", "accelerate.exe", "accelerate.commands.accelerate_cli") and argv[i + 1:i + 2] == \
                ["launch"]:
            rest = list(argv[i + 2:])
            break
        if name == "accelerate.commands.launch":
            rest = list(argv[i + 1:])
            break
    if rest is None:
        return None
    try:
        from accelerate.commands.launch import launch_command_parser

        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return launch_command_parser().parse_args(rest)
    except (Exception, SystemExit):
        return None


def _config_processes(launch: argparse.Namespace) -> int | None:
    """The number of processes of the accelerate config file that launch reads (``--config_file``, or the default
    one unless ``--cpu``, as accelerate does), if any."""
    try:
        from accelerate.commands.config.config_args import default_config_file, load_config_from_file

        if launch.config_file is None and (launch.cpu or not os.path.isfile(default_config_file)):
            return None
        n = load_config_from_file(launch.config_file).num_processes
        return int(n) if n is not None else None
    except Exception:
        return None


def _spell_launch(launch: argparse.Namespace | None, env: Mapping[str, str]) -> str:
    """The launch command as far as it is known (its launcher options, not the program's)."""
    words = ["accelerate", "launch"]
    if launch is None:
        if env.get("ACCELERATE_USE_CPU", "").lower() in _TRUE:
            words.append("--cpu")
        return " ".join(words + ["(asked for several processes: it set MASTER_ADDR and MASTER_PORT)"])
    if launch.config_file:
        words += ["--config_file", launch.config_file]
    if launch.cpu:
        words.append("--cpu")
    if launch.num_processes is not None:
        words += ["--num_processes", str(launch.num_processes)]
    if (launch.num_machines or 1) > 1:
        words += ["--num_machines", str(launch.num_machines)]
    return " ".join(words)


def _working_commands(n: int | None, module: str | None, cpu_option: str | None,
                      launch: argparse.Namespace | None) -> str:
    """`accelerate launch --multi_gpu --num_processes N PROGRAM ...` and the torchrun equivalent, with the CPU
    chosen by ``cpu_option`` (or the environment variable ACCELERATE_USE_CPU=true)."""
    if module:
        program = f"-m {module}"
    elif launch is not None and getattr(launch, "training_script", None):
        program = f"-m {launch.training_script}" if launch.module else launch.training_script
    else:
        program = _this_program() or "PROGRAM"
    count = str(n) if n else "N"
    prefix, suffix = ("", f" {cpu_option} ...") if cpu_option else ("ACCELERATE_USE_CPU=true ", " ...")
    return (f"{prefix}accelerate launch --multi_gpu --num_processes {count} {program}{suffix} "
            f"(or {prefix}torchrun --nproc_per_node {count} {program}{suffix})")


def _this_program() -> str | None:
    """How this process's program is named on a command line: ``-m package.module`` or the script's path."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return f"-m {spec.name.removesuffix('.__main__')}"
    return sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else None
