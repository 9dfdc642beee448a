"""The monitor's pure view helpers, themes and replay loading (no terminal needed)."""

from __future__ import annotations

import pytest
from support.tui_fixtures import accumulate, make_capture, small_captures, write_jsonl

from specmon.decision.acceptance import per_position
from specmon.errors import UserError
from specmon.formatting import fmt_number, run_progress
from specmon.sources.replay import RAW, RECORDS, load_source
from specmon.stats import MetricRow
from specmon.tui.requests import log_row, raw_payload
from specmon.tui.themes import (
    MONOCHROME_THEME,
    THEME_DIR,
    load_themes,
    resolve_theme,
    theme_from_toml,
)
from specmon.tui.view import (
    SPEC_COLUMNS,
    SPEC_ROWS,
    fold_histogram,
    stat_rows,
)


def test_fold_histogram_matches_aiperf_console_examples():
    # docs/metrics.md §8.4: {0:6100,1:300,2:1800,3:1800} -> 61% 3% 18% 18% of 10000 steps
    buckets = fold_histogram({0: 6100, 1: 300, 2: 1800, 3: 1800})
    assert [(b.label, b.count, round(b.pct, 1)) for b in buckets] == [
        ("0", 6100, 61.0),
        ("1", 300, 3.0),
        ("2", 1800, 18.0),
        ("3", 1800, 18.0),
    ]


def test_fold_histogram_folds_8_and_above_and_shows_gaps():
    # buckets 0..11 one step each: 0..7 at 1/12 = 8.33 %, ">=8" = 4/12 = 33.33 %
    buckets = fold_histogram({j: 1 for j in range(12)})
    assert [b.label for b in buckets] == ["0", "1", "2", "3", "4", "5", "6", "7", ">=8"]
    assert buckets[-1].count == 4 and round(buckets[-1].pct, 2) == 33.33
    assert round(buckets[0].pct, 2) == 8.33
    # gaps between observed keys are shown as empty buckets
    assert [(b.label, b.count) for b in fold_histogram({0: 2, 3: 1})] == [
        ("0", 2),
        ("1", 0),
        ("2", 0),
        ("3", 1),
    ]
    assert fold_histogram({}) == [] and fold_histogram({0: 0}) == []


def test_stat_rows_format_like_console_table():
    stats = {
        "spec_decode_acceptance_length": MetricRow(
            "ratio", 1234.5, min=1.0, max=2.0, p99=2.0, p90=1.5, p50=1.25, std=0.125
        ),
        "spec_decode_token_weighted_acceptance_length": MetricRow("ratio", 2.5, derived=True),
    }
    rows = stat_rows(stats, SPEC_ROWS, SPEC_COLUMNS)
    assert rows[0] == (
        "Acceptance Length (ratio)",
        ["1,234.50", "1.00", "2.00", "2.00", "1.50", "1.25", "0.12"],
    )
    # a derived row shows its avg only; rows without data are left out
    assert rows[1] == ("Token-Weighted Acceptance Length (ratio)", ["2.50"] + ["N/A"] * 6)
    assert len(rows) == 2
    assert fmt_number(None, na="N/A") == "N/A" and fmt_number(float("nan"), na="N/A") == "N/A"


def test_spec_rows_are_the_console_rows_in_display_order():
    # docs/metrics.md §5-§6: the visible SPEC_DECODE metrics, by display order 5000..5045
    assert [r[0] for r in SPEC_ROWS] == [
        "spec_decode_acceptance_length",
        "spec_decode_token_weighted_acceptance_length",
        "spec_decode_draft_acceptance_rate",
        "spec_decode_overall_draft_acceptance_rate",
        "spec_decode_accepted_per_verified",
        "spec_decode_steps",
        "spec_decode_zero_step_requests",
    ]


def test_per_position_from_the_small_fixture():
    # pooled over r1..r3: h = {0: 1+3+0, 1: 0+1+0, 2: 1+0+2, 3: 2+0+2} = {0:4, 1:1, 2:3, 3:4}, N=12
    acc = accumulate(small_captures())
    hist = acc.snapshot().pooled_histogram
    assert hist == {0: 4, 1: 1, 2: 3, 3: 4}
    rows = per_position(hist, 3)
    # S_1 = (1+3+4)/12, S_2 = (3+4)/12, S_3 = 4/12; a_1 = S_1, a_2 = 7/8, a_3 = 4/7
    assert [round(r.unconditional, 4) for r in rows] == [
        round(8 / 12, 4),
        round(7 / 12, 4),
        round(4 / 12, 4),
    ]
    assert [round(r.conditional, 4) for r in rows] == [
        round(8 / 12, 4),
        round(7 / 8, 4),
        round(4 / 7, 4),
    ]
    assert [r.trials for r in rows] == [12, 8, 7]
    assert per_position({}, 3) == []


def test_run_progress_bounded_and_unbounded():
    # 30 of 60 in 10 s -> 3 req/s, 30 left -> ETA 10 s
    p = run_progress(30, 10.0, 60, None)
    assert (p.fraction, p.eta_s, p.label) == (0.5, 10.0, "30/60")
    # duration 60 s, 15 s elapsed -> 25 %, 45 s left
    p = run_progress(7, 15.0, None, 60.0)
    assert (p.fraction, p.eta_s) == (0.25, 45.0)
    p = run_progress(7, 15.0, None, None)
    assert p.fraction is None and p.label == "7 done"


def test_log_row_fields_and_error_kind():
    acc = accumulate(small_captures() + [make_capture(9, None, start_ms=900, error="http_error")])
    line, kind = log_row(acc.results[0], 0)
    # r1: output tokens = sum (j+1) h_j = 1*1 + 3*1 + 4*2 = 12; 4 steps; AL 3.00;
    # rate 8/12 = 66.7 %; non-streaming (no TTFT); latency 200 ms
    assert kind == "ok"
    assert line.split() == ["1", "req-0001", "chat", "12", "4", "3.00", "66.7", "-", "200.0", "ok"]
    line, kind = log_row(acc.results[3], 3)
    assert kind == "error" and line.rstrip().endswith("ERR http_error")
    assert '"num_spec_steps": 4' in raw_payload(acc.results[0])


def test_bundled_themes_load_and_resolve(monkeypatch):
    names = [t.name for t in load_themes((THEME_DIR,))]
    assert {"specmon-dark", "specmon-light", MONOCHROME_THEME} <= set(names)
    assert resolve_theme("light", names, no_color=False) == "specmon-light"
    assert resolve_theme(None, names, no_color=False) == "specmon-dark"
    assert resolve_theme("light", names, no_color=True) == MONOCHROME_THEME
    with pytest.raises(UserError, match="unknown theme 'neon'"):
        resolve_theme("neon", names, no_color=False)


def test_bad_theme_file_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nprimary = "#fff"\nsparkle = true\n')
    with pytest.raises(UserError, match="unknown key 'sparkle'"):
        theme_from_toml(bad)
    bad.write_text('name = "x"\nprimary = "not-a-colour"\n')
    with pytest.raises(UserError, match="bad.toml"):
        theme_from_toml(bad)


def test_replay_source_detects_both_formats(tmp_path):
    from specmon.capture import RawCapture
    from specmon.session import RunSession

    raw = write_jsonl(tmp_path / "raw.jsonl", small_captures())
    src = load_source(raw)
    assert src.kind == RAW and len(src.items) == 3 and src.model == "demo-model"
    session = RunSession(tmp_path / "run", "records", {})
    for c in small_captures():
        session.add(RawCapture.from_dict(c))
    session.finish()
    src = load_source(tmp_path / "run" / "profile_export.jsonl")
    assert src.kind == RECORDS and len(src.items) == 3


def test_replay_source_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_source(tmp_path / "missing.jsonl")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": 1}\n')
    with pytest.raises(UserError, match="neither a raw capture nor"):
        load_source(junk)
    summary = tmp_path / "profile_export_aiperf.json"
    summary.write_text('{\n  "schema_version": "1.4"\n}\n')
    with pytest.raises(UserError, match="one JSON document"):
        load_source(summary)
    junk.write_text("")
    with pytest.raises(UserError, match="empty"):
        load_source(junk)
    mixed = write_jsonl(tmp_path / "mixed.jsonl", small_captures())
    with mixed.open("a") as fh:
        fh.write("not json\n")
        fh.write(
            '{"endpoint": "chat", "streaming": "yes", "request": {}, "status": 200, "responses": []}\n'
        )
    src = load_source(mixed)
    assert len(src.items) == 3
    assert [s.split(":")[0] for s in src.skipped] == ["line 4", "line 5"]
