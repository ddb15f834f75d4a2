"""The inventory of the recorded data (``analyse.inventory``): GPU labels stable under added
runs, counts, roles and git times, on synthetic run folders and on ``data/runs``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from attn_analysis import record
from attn_analysis.analyse import inventory as inv

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "runs"
H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"


def make_run(runs_dir: Path, name: str, trials, *, plan=None, fingerprint_only=False) -> Path:
    """A run folder with run.json, plan.json and one journal trial unit per ``trials``
    entry ``(gpu_name, uuid, started_utc)``."""
    plan = plan or {"configs": ["B32-H8-S512-D64-fp16"], "candidates": ["sdpa", "triton"],
                    "modes": ["graph"], "trials": len(trials), "placements": 8,
                    "timing": {"n_samples": 20}, "matrix": "fixed-v1"}
    run = runs_dir / name
    (run / "journal").mkdir(parents=True)
    (run / "plan.json").write_text(json.dumps(plan))
    (run / "run.json").write_text(json.dumps({"run_id": name, "plan": plan,
                                              "attn_analysis_version": "9.9.9",
                                              "code_commit": "abc1234",
                                              "finished_utc": "2026-11-25T00:00:00+00:00"}))
    fps = {}
    for t, (gpu, uuid, start) in enumerate(trials):
        fp = {"gpu_name": gpu, "gpu_uuid": uuid, "device_kind": "cuda" if gpu else "cpu"}
        fps[str(t)] = fp
        if not fingerprint_only:
            unit = {"kind": "trial", "trial": t, "fingerprint": fp, "started_utc": start}
            (run / "journal" / record.unit_name("trial", trial=t)).write_text(json.dumps(unit))
    (run / "fingerprint.json").write_text(json.dumps({"trials": fps}))
    return run


def ts(hour: int) -> str:
    return f"2026-11-24T{hour:02d}:00:00+00:00"


@pytest.fixture
def runs(tmp_path):
    d = tmp_path / "runs"
    make_run(d, "h200-one", [(H200, "GPU-bbbb0000-1", ts(3)), (H200, "GPU-bbbb0000-1", ts(4))])
    make_run(d, "h100-one", [(H100, "aaaa0000-1", ts(5))])
    make_run(d, "h200-two", [(H200, "cccc0000-1", ts(1)), (H200, "dddd0000-1", ts(6))])
    make_run(d, "h100-old", [(H100, None, ts(0))] * 3,
             plan={"candidates": ["sdpa", "sdpa_twin", "sdpa_spin1000"], "trials": 3,
                   "timing": {"n_samples": 100}})
    return d


def test_labels_follow_each_models_first_trial(runs):
    labels = inv.gpu_labels(runs)
    assert labels == {"cccc0000-1": "H200-a", "bbbb0000-1": "H200-b",
                      "dddd0000-1": "H200-c", "aaaa0000-1": "H100-a"}
    assert inv.gpu_label("GPU-bbbb0000-1", runs) == "H200-b"
    assert inv.gpu_label("dddd0000", runs) == "H200-c"  # a unique 8-character prefix
    for bad in ("", "abc", "ffff0000-1", None):
        with pytest.raises(ValueError, match="`uuid`"):
            inv.gpu_label(bad, runs)


def test_a_run_added_later_relabels_no_gpu(runs):
    before = inv.gpu_labels(runs)
    make_run(runs, "h200-new", [(H200, "0000eeee-1", ts(9)), (H200, "bbbb0000-1", ts(10))])
    after = inv.gpu_labels(runs)
    assert {k: after[k] for k in before} == before
    assert after["0000eeee-1"] == "H200-d"
    assert inv.gpu_inventory(runs).set_index("label").loc["H200-b", "runs"] == \
        ["h200-new", "h200-one"]


def test_gpu_table_rows_and_unrecorded_uuids(runs):
    g = inv.gpu_inventory(runs)
    assert list(g.columns)[:6] == ["label", "model", "uuid", "runs", "n_runs", "processes"]
    assert g["label"].tolist() == ["H100-a", "H200-a", "H200-b", "H200-c",
                                   f"H100 ({inv.UNRECORDED}, h100-old)"]
    row = g.set_index("label").loc["H200-b"]
    assert (row["uuid"], row["runs"], row["n_runs"], row["processes"]) == \
        ("bbbb0000-1", ["h200-one"], 1, 2)
    assert g["uuid"].iloc[-1] is None and g["processes"].iloc[-1] == 3


def test_run_table(runs):
    r = inv.run_inventory(runs).set_index("run")
    assert r.index.tolist() == ["h100-old", "h200-two", "h200-one", "h100-one"]  # first entry
    assert r.loc["h200-two", "gpus"] == ["H200-a", "H200-c"]
    assert r.loc["h200-two", "processes"] == 2
    assert r.loc["h200-one", ["placements_per_unit", "samples", "candidates", "configs",
                              "protocol", "matrix"]].tolist() == [8, 20, 2, 1, 2, "fixed-v1"]
    assert r.loc["h100-old", ["placements_per_unit", "protocol", "role"]].tolist() == \
        [1, 1, "calibration"]
    assert r.loc["h200-one", "role"] == "exploratory"
    assert r.loc["h200-two", "first_entry_utc"] == ts(1)
    # tmp_path is no git checkout: no commit times
    assert r["plan_committed_utc"].isna().all() and r["plan_committed_utc"].iloc[0] is None
    assert r["results_commit"].isna().all()
    assert (r["code_version"] == "9.9.9").all()  # the package version each run recorded
    assert (r["code_commit"] == "abc1234").all()  # the commit its code came from


def test_counts(runs):
    c = inv.counts(runs)
    assert c["n_runs"] == 4 and c["n_processes"] == 8
    assert (c["n_gpus"], c["n_gpus_h100"], c["n_gpus_h200"]) == (4, 1, 3)
    assert (c["n_runs_h100"], c["n_runs_h200"]) == (2, 2)
    assert (c["n_processes_h100"], c["n_processes_h200"]) == (4, 4)
    assert c["n_runs_unidentified_gpu"] == 1 and c["n_models"] == 2
    assert (c["n_runs_calibration"], c["n_runs_exploratory"], c["n_runs_confirmatory"]) == \
        (1, 3, 0)


def test_fingerprint_json_when_the_journal_has_no_trial_units(tmp_path):
    make_run(tmp_path, "r", [(H200, "ffff0000-9", ts(1))] * 2, fingerprint_only=True)
    g = inv.gpu_inventory(tmp_path)
    assert g["label"].tolist() == ["H200-a"] and g["processes"].tolist() == [2]


def test_cpu_runs_have_no_gpu(tmp_path):
    make_run(tmp_path, "cpu-run", [(None, None, ts(1))])
    assert inv.gpu_inventory(tmp_path).empty
    r = inv.run_inventory(tmp_path)
    assert r["model"].tolist() == ["CPU"] and r["gpus"].tolist() == [[]]
    assert inv.counts(tmp_path)["n_gpus"] == 0


def test_a_run_of_a_configs_campaign_is_named_and_the_powered_ones_confirm():
    from attn_analysis import configs
    name, plan = next(iter(configs.POWERED_PLANS.items()))
    run_plan = {"matrix": plan["matrix"], "modes": list(plan["modes"]),
                "candidates": list(reversed(plan["candidates"]))}
    assert inv.campaign_of(run_plan) == ("POWERED_PLANS", name)
    assert inv.run_role("x", run_plan) == "confirmatory"
    assert inv.campaign_of({"matrix": "fixed-v1", "candidates": ["nothing"]}) is None
    # a plan outside POWERED_PLANS that states its family is pre-registered too
    gluon = configs.GLUON_PLANS["gluon-v2-target"]
    assert "family_size" in gluon
    gluon_run = {"matrix": gluon["matrix"], "modes": list(gluon["modes"]),
                 "candidates": list(gluon["candidates"])}
    assert inv.campaign_of(gluon_run) == ("GLUON_PLANS", "gluon-v2-target")
    assert inv.run_role("x", gluon_run) == "confirmatory"
    old = configs.GLUON_PLANS["gluon-target"]  # exploratory: no family stated
    assert inv.run_role("x", {"matrix": old["matrix"], "modes": list(old["modes"]),
                              "candidates": list(old["candidates"])}) == "exploratory"


def test_roles():
    assert inv.run_role("x", {"matrix": "confirm-v1"}) == "confirmatory"
    assert inv.run_role("x", {"candidates": ["sdpa", "sdpa_twin", "sdpa_spin2000e2"]}) == \
        "calibration"
    assert inv.run_role("h200-controls-final", {"candidates": ["sdpa", "triton"]}) == \
        "calibration"
    assert inv.run_role("x", {"candidates": ["sdpa", "triton"]}) == "exploratory"
    assert inv.run_role("x", {"matrix": "confirm-v1"}, {"role": "pilot"}) == "pilot"


def test_label_letters_and_models():
    assert [inv.label_letters(i) for i in (0, 1, 25, 26, 27, 701, 702)] == \
        ["a", "b", "z", "aa", "ab", "zz", "aaa"]
    for bad in (-1, 1.0, True, "a"):
        with pytest.raises(ValueError, match="`index`"):
            inv.label_letters(bad)
    assert inv.gpu_model(H100) == "H100" and inv.gpu_model(H200) == "H200"
    assert inv.gpu_model("NVIDIA L4") == "L4" and inv.gpu_model(None) == "CPU"


def test_invalid_runs_dir(tmp_path):
    with pytest.raises(ValueError, match="`runs_dir`"):
        inv.run_inventory(tmp_path / "missing")


def _git(cwd, *args, when=None):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    if when:
        env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_git_times_of_plan_and_results(tmp_path):
    make_run(tmp_path / "data" / "runs", "r", [(H200, "ffff0000-9", ts(1))])
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "data/runs/r/plan.json")
    _git(tmp_path, "commit", "-qm", "plan", when="2026-11-24T00:30:00+00:00")
    _git(tmp_path, "add", "data")
    _git(tmp_path, "commit", "-qm", "results", when="2026-11-24T05:00:00+01:00")
    r = inv.run_inventory(tmp_path / "data" / "runs").iloc[0]
    assert r["plan_committed_utc"] == "2026-11-24T00:30:00+00:00"
    assert r["results_committed_utc"] == "2026-11-24T04:00:00+00:00"  # in UTC
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tmp_path, text=True,
                          capture_output=True, check=True).stdout.strip()
    assert r["results_commit"] == head  # the commit that added run.json, not the plan's


# ------------------------------------------------------------------ the recorded data

def test_real_data_counts_agree_with_the_runs():
    start = time.perf_counter()
    g, r, c = inv.gpu_inventory(RUNS), inv.run_inventory(RUNS), inv.counts(RUNS)
    assert time.perf_counter() - start < 5
    folders = sorted(p.name for p in RUNS.iterdir() if (p / "run.json").is_file())
    assert sorted(r["run"]) == folders and c["n_runs"] == len(folders)
    processes = {p: len(json.loads((RUNS / p / "fingerprint.json").read_text())["trials"])
                 for p in folders}
    assert dict(zip(r["run"], r["processes"])) == processes
    assert c["n_processes"] == sum(processes.values()) == g["processes"].sum()
    assert c["n_gpus"] == g["uuid"].notna().sum() == c["n_gpus_h100"] + c["n_gpus_h200"]
    assert g["label"].is_unique and g["uuid"].dropna().is_unique
    # every UUID a fingerprint records has a label, and a run names the GPUs it used
    uuids = {fp["gpu_uuid"].removeprefix("GPU-") for p in folders for fp in json.loads(
        (RUNS / p / "fingerprint.json").read_text())["trials"].values() if fp.get("gpu_uuid")}
    assert set(inv.gpu_labels(RUNS)) == uuids
    # the confirmatory runs are the confirm matrix's and the pre-registered campaigns'
    # (every powered plan, and any plan that states its family, e.g. gluon-v2-target)
    from attn_analysis import configs
    registered = {name for table in ("POWERED_PLANS", "GLUON_PLANS")
                  for name, plan in getattr(configs, table).items()
                  if table == "POWERED_PLANS" or "family_size" in plan}
    confirm = r[r["role"] == "confirmatory"]
    for row in confirm.itertuples():
        assert row.matrix.startswith("confirm") or row.campaign in registered, row.run
    assert {p for p in folders if json.loads((RUNS / p / "plan.json").read_text())
            .get("matrix", "").startswith("confirm")} <= set(confirm["run"])


def test_real_data_agrees_with_a_loaded_and_verified_run():
    name = "h200-kernel-target-p2"
    run = record.load(RUNS / name)  # verifies the run
    row = inv.run_inventory(RUNS).set_index("run").loc[name]
    assert row["processes"] == len(run.fingerprint["trials"])
    uuid = next(iter(run.fingerprint["trials"].values()))["gpu_uuid"]
    assert row["gpus"] == [inv.gpu_label(uuid, RUNS)]


def test_no_torch_import():
    code = ("import sys; from attn_analysis.analyse import inventory as i; "
            f"i.counts({str(RUNS)!r}); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ software and commands

from attn_analysis.analyse import software  # noqa: E402


def test_cudnn_and_peer_versions():
    assert software.cudnn_version(91900) == "9.19.0"
    assert software.cudnn_version("91002") == "9.10.2"
    assert software.cudnn_version(8902) == "8.9.2"
    assert software.cudnn_version(None) == "" and software.cudnn_version("9.1.0") == "9.1.0"
    infos = [json.dumps({"package": "flash-attn-4", "version": "4.0.0b36"}), None, "",
             {"package": "flashinfer-python", "version": "0.7.2"}, {"implementation": "x"},
             {"package": "flash-attn-4", "version": "4.0.0b36"}]
    assert software.peer_versions(infos) == ["flash-attn-4 4.0.0b36", "flashinfer-python 0.7.2"]


def test_software_table_of_synthetic_runs(tmp_path):
    import pandas as pd
    run = make_run(tmp_path, "r", [(H200, "ffff0000-9", ts(1)), (H200, "ffff0000-9", ts(2))])
    fps = {str(t): {"gpu_name": H200, "gpu_uuid": "ffff0000-9", "torch_version": "2.11.0",
                    "cuda_version": "13.0", "cudnn_version": 91900, "driver_version": d,
                    "triton_version": "3.6.0", "python_version": "3.12.3"}
           for t, d in enumerate(("580.1", "580.2"))}
    (run / "fingerprint.json").write_text(json.dumps({"trials": fps}))
    pd.DataFrame({"info": [json.dumps({"package": "flash-attn-4", "version": "4.0.0b36"}),
                           json.dumps({})]}).to_parquet(run / "units.parquet")
    row = software.software_table(tmp_path).iloc[0]
    assert (row["run"], row["GPU"], row["cuDNN"], row["peers"]) == \
        ("r", "H200-a", "9.19.0", "flash-attn-4 4.0.0b36")
    assert row["driver"] == "580.1, 580.2"  # processes that differ show every value
    with pytest.raises(ValueError, match="`runs_dir`"):
        software.software_table(tmp_path / "none")


def test_software_table_of_the_recorded_runs():
    table = software.software_table(RUNS)
    assert sorted(table["run"]) == sorted(inv.run_inventory(RUNS)["run"])
    for col in ("torch", "CUDA", "cuDNN", "driver", "Triton"):
        assert (table[col] != "?").all(), col
    # the runs of the peers record each peer's version
    assert table.set_index("run").loc["h100-sota-confirm", "peers"].count("flash-attn-4") == 1


def test_base_software_and_peer_runs_split_the_wide_table():
    table = pd.DataFrame([
        {"run": "b", "GPU": "H200-a", "torch": "2.11", "CUDA": "13.0", "cuDNN": "9.19.0",
         "driver": "580", "Triton": "3.6.0", "Python": "3.12", "peers": "fa4 4.0; fi 0.7"},
        {"run": "a", "GPU": "H100-a", "torch": "2.11", "CUDA": "13.0", "cuDNN": "9.19.0",
         "driver": "580", "Triton": "3.6.0", "Python": "3.12", "peers": ""},
        {"run": "c", "GPU": "H100-b", "torch": "2.10", "CUDA": "12.8", "cuDNN": "9.10.2",
         "driver": "570", "Triton": "3.5.0", "Python": "3.12", "peers": "fa4 4.0"}])
    base = software.base_software(table)
    assert base["n_runs"].tolist() == [2, 1] and base.loc[0, "runs"] == ["a", "b"]
    assert base.loc[1, "torch"] == "2.10" and base.loc[1, "runs"] == ["c"]
    peers = software.peer_runs(table)
    assert peers.to_dict("list") == {"package": ["fa4", "fi"], "version": ["4.0", "0.7"],
                                     "n_runs": [2, 1], "runs": [["b", "c"], ["b"]]}
    with pytest.raises(ValueError, match="`table`"):
        software.base_software(table.drop(columns="torch"))
    # the recorded runs: every run in exactly one software row
    real = software.software_table(RUNS)
    assert software.base_software(real)["n_runs"].sum() == len(real)


def test_compact_labels():
    assert inv.compact_labels(["H200-k", "H200-n", "H200-m", "H200-l"]) == "H200-k,l,m,n"
    assert inv.compact_labels(["H200-aa", "H200-z", "H100-b"]) == "H100-b, H200-z,aa"
    assert inv.compact_labels([f"H100 ({inv.UNRECORDED}, r)"]) == "?"
    assert inv.compact_labels([]) == "-"
    with pytest.raises(ValueError, match="`labels`"):
        inv.compact_labels("H100-a")


def _section(path: Path, heading: str) -> str:
    """The text of the Markdown section ``heading`` of ``path``, up to the next heading of
    the same or a higher level."""
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip("#").strip() == heading)
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and
                len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[start:end]).replace("**", "")


def test_every_command_duration_is_in_the_section_it_cites():
    df = software.command_durations()
    # the README's two commands and its GPU command, as the README writes them
    readme = (ROOT / "README.md").read_text()
    names = set(df["name"])
    assert {"README 1: install and build the book", "README 2: the test suite",
            "GPU command"} <= names
    for name in ("README 1: install and build the book", "README 2: the test suite"):
        assert df.loc[df["name"] == name, "command"].iloc[0] in readme, name
    # the README's GPU command (without its --out) has a measured duration
    found = re.search(r"python3 -m attn_analysis sweep --out \S+ (--matrix .*)", readme)
    assert found, "the README names no GPU command"
    gpu = df.loc[df["name"] == "GPU command", "command"]
    assert gpu.str.endswith(found.group(1).strip()).any(), found.group(1)
    for row in df.itertuples():
        path, heading = (s.strip() for s in row.source.split("§"))
        text = _section(ROOT / path, heading)
        assert f"{row.wall_s:g} s" in text, (row.command, row.wall_s, row.source)
        assert row.commit in text


def test_command_durations_refuse_a_bad_file(tmp_path):
    bad = tmp_path / "d.csv"
    bad.write_text("command,wall_s\nx,1\n")
    with pytest.raises(ValueError, match="`durations`"):
        software.command_durations(bad)
    good = software.command_durations().head(1).assign(wall_s=-1.0)
    good.to_csv(bad, index=False)
    with pytest.raises(ValueError, match="positive"):
        software.command_durations(bad)


def test_plan_statement():
    import pandas as pd
    row = {"run": "c1", "role": "confirmatory", "first_entry_utc": ts(1),
           "plan_committed_utc": ts(5), "results_committed_utc": ts(5)}
    said = inv.plan_statement(pd.DataFrame([row]))
    assert "c1 entered git in the commit that added their results" in said
    assert "cannot show" in said
    later = inv.plan_statement(pd.DataFrame([{**row, "results_committed_utc": ts(7)}]))
    assert "after their first process started" in later
    before = inv.plan_statement(pd.DataFrame([{**row, "plan_committed_utc": ts(0)}]))
    assert before.startswith("Every confirmatory plan entered git before")
    # without git history nothing is claimed
    none = inv.plan_statement(pd.DataFrame([{**row, "plan_committed_utc": None}]))
    assert "no git history" in none and "before" not in none
    assert inv.plan_statement(pd.DataFrame([{**row, "role": "exploratory"}])) == \
        "No recorded run is confirmatory."
    both = inv.plan_statement(pd.DataFrame([row, {**row, "run": "c2",
                                                  "plan_committed_utc": ts(0)}]))
    assert "The plans of c2 entered git before their first process." in both
    with pytest.raises(ValueError, match="`runs`"):
        inv.plan_statement(pd.DataFrame({"run": ["x"]}))
    # the recorded confirmatory runs: their plans entered git with their results
    real = inv.plan_statement(inv.run_inventory(RUNS))
    assert "in the commit that added their results" in real


def test_a_plans_commit_time_is_found_in_either_way_configs_writes_it(tmp_path):
    """A plan set as an item of a plan table (PLANS["name"] = {...}) is dated by the commit
    that added it, like one written as a dict key; earlier, a plan written that way was
    dated by a later commit that happened to mention '"name":'."""
    from attn_analysis.analyse import inventory as inv
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    (tmp_path / "attn_analysis").mkdir()
    configs = tmp_path / "attn_analysis" / "configs.py"

    def commit(text, when):
        configs.write_text(text)
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", when], check=True,
                       env={"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when,
                            "PATH": "/usr/bin:/bin"})

    commit('PLANS = {"keyed": {}}\n', "2026-01-01T00:00:00+00:00")
    commit('PLANS = {"keyed": {}}\nPLANS["item"] = {}\n', "2026-01-02T00:00:00+00:00")
    commit('PLANS = {"keyed": {}}\nPLANS["item"] = {}\n# "item": mentioned\n',
           "2026-01-03T00:00:00+00:00")
    found = inv._git_campaign_added(tmp_path, ["keyed", "item", "absent"])
    assert found == {"keyed": "2026-01-01T00:00:00+00:00", "item": "2026-01-02T00:00:00+00:00"}
