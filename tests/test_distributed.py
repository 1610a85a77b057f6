"""The distributed plan, the launcher's arguments and its failure lines, as pure functions.

The CUDA side (NCCL, one GPU per rank, the `strong` determinism tier) is covered here
without a GPU: the choices are values computed from the device name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dlm.errors import TrainingError, UsageError
from dlm.lock.determinism import determinism_class, planned_flags
from dlm.train.distributed import (
    RankGroup,
    RankInfo,
    is_power_of_two,
    make_plan,
    pick_backend,
    rank_error_message,
    write_rank_error,
)
from dlm.train.launch import LaunchSpec, accelerate_argv, describe_failure, rank_threads, torchrun_argv

PROGRAM = ["dlm", "train", "/docs/a.dlm"]


def test_rank_info_reads_the_launcher_environment() -> None:
    info = RankInfo.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (3, 4, 1, 2)
    assert info.distributed and not info.is_main
    alone = RankInfo.from_env({})
    assert (alone.rank, alone.world_size, alone.distributed, alone.is_main) == (0, 1, False, True)


@pytest.mark.parametrize(
    "env",
    [
        {"RANK": "2", "WORLD_SIZE": "2"},
        {"RANK": "0", "WORLD_SIZE": "0"},
        {"RANK": "x", "WORLD_SIZE": "2"},
        {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
    ],
)
def test_rank_info_refuses_an_inconsistent_environment(env: dict[str, str]) -> None:
    with pytest.raises(TrainingError, match="launcher environment"):
        RankInfo.from_env(env)


def test_backend_is_gloo_on_cpu_nccl_on_cuda_none_alone() -> None:
    assert pick_backend(1, "cpu") == pick_backend(1, "cuda") == "none"
    assert pick_backend(2, "cpu") == "gloo"
    assert pick_backend(8, "cuda") == "nccl"


def test_plan_counts_rows_and_micro_batches_per_step() -> None:
    plan = make_plan(4, batch_size=2, grad_accum=3, device="cuda")
    assert (plan.backend, plan.rows_per_step, plan.micro_batches_per_step) == ("nccl", 24, 12)
    assert plan.notes() == []
    with pytest.raises(TrainingError, match="at least 1"):
        make_plan(2, batch_size=0, grad_accum=1, device="cpu")


def test_a_world_size_that_is_not_a_power_of_two_is_noted() -> None:
    assert [n for n in range(1, 17) if is_power_of_two(n)] == [1, 2, 4, 8, 16]
    (note,) = make_plan(3, 2, 1, "cpu").notes()
    assert "not a power of two" in note


def test_cuda_ranks_keep_the_strong_tier_switches() -> None:
    """Every CUDA rank runs `apply_determinism`, so the class each records is the
    single-process one: strong with the full set of switches, best-effort without."""
    assert determinism_class("cuda", planned_flags()) == "strong"
    assert determinism_class("cuda", planned_flags(warn_only=True)) == "best-effort"
    assert determinism_class("cpu", planned_flags()) == "advisory"


def test_one_process_group_needs_no_collectives() -> None:
    group = RankGroup(RankInfo(), "cpu")
    assert group.gather({"a": 1}) == [{"a": 1}]
    assert group.from_main("id") == "id"
    calls = []
    value, waited, took = group.in_turns(lambda: calls.append(1) or "rows")
    assert (value, waited, calls) == ("rows", 0.0, [1]) and took >= 0


def test_rank_errors_name_the_rank_and_reach_the_launcher(tmp_path: Path) -> None:
    info = RankInfo(rank=1, world_size=2, local_rank=1, local_world_size=2)
    assert rank_error_message(info, "disk full") == "rank 1: disk full"
    assert rank_error_message(RankInfo(), "disk full") == "disk full"
    error_file = tmp_path / "error.json"
    write_rank_error("rank 1: disk full", {"TORCHELASTIC_ERROR_FILE": str(error_file)})
    assert json.loads(error_file.read_text())["message"] == "rank 1: disk full"
    write_rank_error("nowhere", {})  # outside a launched rank nothing is written


def test_torchrun_arguments_for_one_machine_and_for_several() -> None:
    one = torchrun_argv(LaunchSpec(2), PROGRAM, Path("/logs"))
    assert one[:4] == ["--nproc-per-node", "2", "--max-restarts", "0"]
    assert "--standalone" in one and one[-4:] == ["-m", *PROGRAM]
    two = torchrun_argv(LaunchSpec(4, nnodes=2, node_rank=1, master_addr="10.0.0.1"), PROGRAM, Path("/l"))
    assert "--standalone" not in two
    assert two[two.index("--node-rank") + 1] == "1" and two[two.index("--master-port") + 1] == "29500"
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(two)  # torchrun itself accepts them
    assert (parsed.nnodes, parsed.node_rank, parsed.master_addr, parsed.module) == ("2", 1, "10.0.0.1", True)
    assert parsed.training_script == "dlm" and parsed.training_script_args == PROGRAM[1:]


def test_accelerate_arguments_carry_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "fsdp.yaml"
    config.write_text("distributed_type: FSDP\n")
    argv = accelerate_argv(LaunchSpec(2, accelerate_config=config), PROGRAM)
    from accelerate.commands.launch import launch_command_parser

    parsed = launch_command_parser().parse_args(argv)
    assert parsed.config_file == str(config) and parsed.num_processes == 2 and parsed.module
    assert parsed.training_script == "dlm" and parsed.training_script_args == PROGRAM[1:]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (LaunchSpec(0), "at least 1"),
        (LaunchSpec(2, nnodes=2, node_rank=2, master_addr="h"), "outside 0..1"),
        (LaunchSpec(2, nnodes=2), "--master-addr"),
        (LaunchSpec(2, accelerate_config=Path("/nonexistent.yaml")), "no such file"),
    ],
)
def test_launch_specs_that_cannot_run_are_usage_errors(spec: LaunchSpec, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        spec.check()


def test_ranks_share_the_cores_unless_the_user_chose() -> None:
    assert rank_threads(2, {}, 16) == "8"
    assert rank_threads(4, {}, 2) == "1"
    assert rank_threads(2, {"OMP_NUM_THREADS": "3"}, 16) == "3"


def _child_failed(tmp_path: Path, failures: dict[int, tuple[int, str | None]]) -> object:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    found = {}
    for rank, (exitcode, message) in failures.items():
        path = tmp_path / f"error-{rank}.json"
        if message is not None:
            path.write_text(json.dumps({"message": message, "timestamp": 100 + rank}))
        found[rank] = ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=str(path))
    return ChildFailedError(sys.executable, found)


def test_failure_line_is_the_first_rank_with_its_cause(tmp_path: Path) -> None:
    exc = _child_failed(tmp_path, {1: (1, "rank 1: disk full"), 0: (1, "rank 0: connection closed")})
    assert describe_failure(exc) == "rank 0: connection closed"  # the earlier timestamp
    assert describe_failure(_child_failed(tmp_path, {1: (1, "rank 1: disk full")})) == "rank 1: disk full"


def test_a_rank_killed_by_a_signal_is_the_cause(tmp_path: Path) -> None:
    exc = _child_failed(tmp_path, {0: (1, "rank 0: RuntimeError: connection closed by peer"), 1: (-9, None)})
    assert describe_failure(exc) == "rank 1: killed by SIGKILL"
    # rank 0, failing on the lost connection, was stopped by the launcher's SIGTERM
    stopped = _child_failed(tmp_path, {0: (-15, None), 1: (-9, None)})
    assert describe_failure(stopped) == "rank 1: killed by SIGKILL"
    assert describe_failure(_child_failed(tmp_path, {1: (-15, None)})) == "rank 1: killed by SIGTERM"
    silent = _child_failed(tmp_path, {1: (3, None)})
    assert describe_failure(silent) == "rank 1: exited with status 3 and no message"


def _env(tier: str) -> object:
    from dlm.lock import Environment

    return Environment(
        hardware_tier=tier,
        cuda_version="12.4" if tier == "cuda" else None,
        rocm_version=None,
        cpu_capability="AVX2",
        torch_threads=4,
        system="Linux",
        machine="x86_64",
        accelerator=None,
        versions={"torch": "2.13.0"},
    )


def test_doctor_shows_the_plan_for_nproc() -> None:
    from dlm.actions.diagnostics import doctor

    assert doctor(environment=_env("cpu")).plan is None  # type: ignore[arg-type]
    gpu = doctor(environment=_env("cuda"), nproc=8, batch_size=2).plan  # type: ignore[arg-type]
    assert gpu is not None
    assert (gpu["backend"], gpu["device"], gpu["rows_per_step"], gpu["notes"]) == ("nccl", "cuda", 16, [])
    cpu = doctor(environment=_env("cpu"), nproc=3).plan  # type: ignore[arg-type]
    assert cpu is not None and cpu["backend"] == "gloo" and "power of two" in cpu["notes"][0]


def test_doctor_cli_prints_the_plan_as_json() -> None:
    from typer.testing import CliRunner

    from dlm.cli.main import app

    result = CliRunner().invoke(app, ["doctor", "--nproc", "2", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plan"]
    assert plan["world_size"] == 2 and plan["backend"] in ("gloo", "nccl")


def test_watch_refuses_several_processes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dlm.cli.main import app

    doc = tmp_path / "a.dlm"
    doc.write_text("---\ndlm_id: 01KAZ5T2Y8M3Q6N0R4V7W9X2C5\n---\n\ntext\n")
    result = CliRunner().invoke(app, ["train", str(doc), "--watch", "--nproc", "2"])
    assert result.exit_code == 2 and "--watch trains in this process" in result.output


def test_training_nproc_is_an_optional_frontmatter_key() -> None:
    from pydantic import ValidationError

    from dlm.doc.schema import TrainingConfig

    assert TrainingConfig().nproc is None and TrainingConfig(nproc=4).nproc == 4
    with pytest.raises(ValidationError):
        TrainingConfig(nproc=0)
