"""The librdkafka transaction timeline (bench/txn_timeline.py), scaled down.

Timing never decides a test: what is checked is that the broker's trace and the client's clock
line up into transactions that hold the requests a librdkafka transaction sends, and that the
arithmetic on the timelines is right.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import txn_timeline as tt


def test_requests_fall_into_their_transaction_and_phase() -> None:
    txns = [tt.Txn(10.0, 10.002, 10.004), tt.Txn(10.005, 10.007, 10.009)]
    trace = [(24, 10.001, 10.0012),   # AddPartitionsToTxn in the first loop
             (0, 10.0025, 10.003),    # Produce in the first commit
             (26, 10.0035, 10.0045),  # EndTxn running past the commit's return: clipped
             (3, 10.0048, 10.0049),   # between the transactions: in neither
             (0, 10.0075, 10.008)]    # Produce in the second commit
    first, second = tt.timelines(txns, trace)
    assert [(s.api, s.phase) for s in first.steps] == [("AddPartitionsToTxn", "loop"), ("Produce", "commit"),
                                                        ("EndTxn", "commit")]
    assert first.steps[1].start_us == pytest.approx(500) and first.steps[1].handling_us == pytest.approx(500)
    assert first.commit_us == pytest.approx(2000)
    assert first.commit_busy_us == pytest.approx(500 + 500)  # the EndTxn counts up to the commit's end
    assert [(s.api, s.phase) for s in second.steps] == [("Produce", "commit")]
    summary = tt.summarize([first, second])
    assert summary["commit_busy_us"] == 750 and summary["commit_waiting_us"] == 1250
    produce = next(r for r in summary["requests"] if r["api"] == "Produce")
    assert produce["per_txn"] == 1.0 and produce["phase"] == "commit"


@pytest.mark.broker  # strom as a process
def test_a_small_run_lines_up_every_transaction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "timeline.json"
    assert tt.main(["--transactions", "12", "--skip", "2", "--show", "1", "--json", str(out)]) == 0
    assert "outside it" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["summary"]["transactions"] == 10
    for tl in data["timelines"]:
        apis = [(s["api"], s["phase"]) for s in tl["steps"]]
        # librdkafka (transaction version 1): AddPartitionsToTxn, one Produce per partition at least
        # (more if a slow loop outlasts linger.ms), and one EndTxn, in the commit.
        assert sum(api == "AddPartitionsToTxn" for api, _ in apis) >= 1, apis
        assert sum(api == "Produce" for api, _ in apis) >= tt.PARTITIONS, apis
        assert apis.count(("EndTxn", "commit")) == 1 and apis[-1] == ("EndTxn", "commit"), apis
        assert tl["commit_us"] > 0


def test_skip_must_leave_transactions() -> None:
    with pytest.raises(SystemExit):
        tt.main(["--transactions", "5", "--skip", "5"])
