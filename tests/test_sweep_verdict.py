"""A sweep's verdict (pipeline/sweep.py) on MLflow's own run records: it never names a winner it could not rank (a
first metric no job gives) and never hides a tie."""

from __future__ import annotations

from mlflow.entities import Metric, Param, Run, RunData, RunInfo, RunTag

from pipeline.sweep import best_job, tied_jobs, unrankable, verdict_line

RANK_BY = ["annotate.sqnr_db_min", "annotate.top1"]


def _job(number: int, method: str, status: str = "FINISHED", quality: str | None = None, **metrics: float) -> Run:
    info = RunInfo(run_id=f"run{number}", experiment_id="1", user_id="ci", status=status, start_time=0, end_time=1,
                   lifecycle_stage="active", run_name=f"digits-{method}")
    tags = [RunTag("sweep_job", str(number)), *([RunTag("quality", quality)] if quality else [])]
    data = RunData(metrics=[Metric(name.replace("__", "."), value, 0, 0) for name, value in metrics.items()],
                   params=[Param("calib.method", method)], tags=tags)
    return Run(info, data)


def test_a_first_metric_no_job_gives_names_no_winner_and_says_what_the_jobs_give():
    """The issue's case: sweep.rank_by=[-codegen.accel_cycles] on a tf2ir sweep, whose jobs give no accelerator cycles."""
    jobs = [_job(0, "minmax", annotate__sqnr_db_min=20.1, codegen__bitexact=1.0), _job(1, "kl", annotate__sqnr_db_min=21.5, codegen__bitexact=1.0)]
    assert best_job(jobs, ["-codegen.accel_cycles"]) is None and tied_jobs(jobs, ["-codegen.accel_cycles"]) == []
    verdict = verdict_line(jobs, ["-codegen.accel_cycles"], ("calib.method",))
    assert verdict.startswith("best: none: no job gives codegen.accel_cycles") and "annotate.sqnr_db_min" in verdict
    assert unrankable(jobs, ["-codegen.accel_cycles"])  # the sweep exits 1


def test_a_sweep_stopped_before_the_ranked_stage_names_no_winner_and_says_why():
    """until=calibrate: no job ran annotate, whose metric the default rule ranks by; not a rule that cannot rank."""
    jobs = [_job(0, "minmax", calibrate__clipped_fraction_max=0.01), _job(1, "kl", calibrate__clipped_fraction_max=0.02)]
    assert verdict_line(jobs, RANK_BY, ("calib.method",)).startswith("best: none: no job ran annotate (until)")
    assert not unrankable(jobs, RANK_BY)


def test_a_tie_on_every_ranked_metric_names_every_tied_job():
    jobs = [_job(0, "minmax", annotate__sqnr_db_min=21.47, annotate__top1=0.7754),
            _job(1, "percentile", annotate__sqnr_db_min=21.47, annotate__top1=0.7754),
            _job(2, "mse", annotate__sqnr_db_min=19.0, annotate__top1=0.79)]
    assert [run.info.run_id for run in tied_jobs(jobs, RANK_BY)] == ["run0", "run1"]
    verdict = verdict_line(jobs, RANK_BY, ("calib.method",))
    assert verdict.startswith("best: a tie of job 0 (calib.method=minmax) and job 1 (calib.method=percentile): each "
                              "annotate.sqnr_db_min 21.47, annotate.top1 0.7754")


def test_the_first_metric_decides_the_next_breaks_ties_and_failed_or_flagged_jobs_never_win():
    jobs = [_job(0, "minmax", annotate__sqnr_db_min=21.0, annotate__top1=0.70),
            _job(1, "kl", annotate__sqnr_db_min=21.0, annotate__top1=0.75),
            _job(2, "mse", status="FAILED", annotate__sqnr_db_min=40.0, annotate__top1=0.9),
            _job(3, "percentile", quality="annotate.top1 below 0.8", annotate__sqnr_db_min=40.0, annotate__top1=0.9),
            _job(4, "auto", annotate__top1=0.99)]  # no first metric: not ranked
    assert best_job(jobs, RANK_BY).info.run_id == "run1" and len(tied_jobs(jobs, RANK_BY)) == 1
    assert verdict_line(jobs, RANK_BY, ("calib.method",)).startswith("best: job 1 (calib.method=kl): annotate.sqnr_db_min 21, annotate.top1 0.75")
    assert best_job(jobs, ["-annotate.sqnr_db_min"]).info.run_id == "run0"  # lower first; the tie keeps the first job
    assert verdict_line([jobs[2]], RANK_BY, ()) == "best: none (no job finished and passed every quality guard)"
