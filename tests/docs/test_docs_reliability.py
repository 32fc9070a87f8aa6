"""docs/reliability.md's "Bounds" table restates the code: each bound is computed here from
the constants it names and compared with the table's cell (the measured figures of the
scenario tables come from runs of tests/cluster/test_chaos.py, not from code)."""

from __future__ import annotations

from pathlib import Path

from kfp_gpu.mpi.launch import node_lost, retry, stall
from testcluster import supervise

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


def bounds_table() -> dict[str, str]:
    """``{what: bound}`` of the page's "Bounds" table."""
    section = PAGE.read_text(encoding="utf-8").split("\n## Bounds\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| what |")]
    return {cells[0].strip(): cells[1].strip() for cells in rows}


def test_the_bounds_table_is_the_codes():
    b = retry.DEFAULT_BACKOFF
    waits = [b.delay(k) for k in range(b.attempts - 1)]
    lease = stall.DEFAULT_LEASE_DURATION_S
    bound = stall.BOUND_FACTOR * lease
    leases = stall.OPERATOR_LEASES
    assert bounds_table() == {
        "the supervisor's restart delay":
            f"{supervise.INITIAL_S:g} s, doubling to {supervise.MAX_S:g} s; back to "
            f"{supervise.INITIAL_S:g} s after {supervise.RESET_S:g} s",
        "the launcher's retries of an API error (watch and calls)":
            f"{len(waits)} retries over at most {sum(waits):g} s ({b.initial_s:g} s doubling "
            f"to {b.maximum_s:g} s)",
        "the launcher's \"nobody reconciles\" line":
            f"not before {bound:g} s without a status change and without a renewal of the "
            f"operator's Lease ({stall.BOUND_FACTOR} x leaseDurationSeconds {lease}); at most "
            f"{bound + 2 * lease:g} s after the later of the two (the Lease is read every "
            f"{lease} s)",
        "the operators' Leases it reads":
            f"MPIJob: {leases['mpijob']}; TrainJob: {leases['trainjob']}",
        "the launcher's node check":
            f"one LIST of the job's pods every {node_lost.POLL_S:g} s while it is neither "
            f"finished nor suspended (the first {node_lost.POLL_S:g} s after the wait "
            "began); a pod being deleted with a DisruptionTarget condition of reason "
            f"{' or '.join(node_lost.REASONS)} ends the job at that look "
            f"({node_lost.REASON}, the job deleted)",
    }


def test_the_outage_line_quotes_the_default_budget():
    b = retry.DEFAULT_BACKOFF
    waits = [b.delay(k) for k in range(b.attempts - 1)]
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert (f"retrying with backoff for up to {sum(waits):.0f} s ({len(waits)} retries)"
            in text)
