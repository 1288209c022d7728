"""The recommendation is a field of the check's result (advisor/lead.py Lead), decided once by the advisor: every
renderer reads it and chooses nothing. Replacing the field changes every format alike; the recommended column is
the Lead's by identity (never found again from numbers); the best change's step time is taken once per check.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re

import zeroadvisor
from conftest import REPO
from zeroadvisor.advisor import advice as advice_module
from zeroadvisor.advisor import lead as lead_module
from zeroadvisor.advisor.lead import Lead, NoFix, decide
from zeroadvisor.advisor.search import Searcher
from zeroadvisor.memory.options import Option
from zeroadvisor.report import Report, overview, render
from zeroadvisor.report.formats import OutputFormat
from zeroadvisor.vocab import Device

CONFIG = REPO / "sample_configs" / "zero3_offload.json"
MODEL = REPO / "sample_configs" / "models" / "llama-2-7b.yaml"
FORMATS = tuple(OutputFormat)


def readme_check() -> zeroadvisor.CheckReport:
    """The README's check: ZeRO-3 with both offloads, where ZeRO-1 fits (lower-stage-fits leads)."""
    return zeroadvisor.check(CONFIG, model=MODEL, gpus=8, gpu="A100-SXM4-80GB", cpu_memory="1TB")


def _plain(option: Option) -> bool:
    return option.offload_optimizer == Device.NONE and option.offload_param == Device.NONE


def _another_lead(result) -> Lead:
    """A Lead the advisor would not decide: another finding's code, made-up words, ZeRO-2's column."""
    (za804,) = [f for f in result.findings if f.code == "ZA804"]
    (zero2,) = [st for st in result.estimate.stages if st.option.stage == 2 and _plain(st.option)]
    return Lead(za804.code, za804.name, za804.recommends, option=zero2, change="a change nobody searched",
                peak_gpu=12_345_678_900, cost="a cost nobody worded", speed="", speed_short="",
                step_time=za804.recommends.step_time)


def _recommended_rows(fmt: OutputFormat, text: str) -> list[str]:
    """The options each format marks recommended, as its labels ("Z1"; the text report: "ZeRO-1")."""
    if fmt is OutputFormat.JSON:
        estimate = json.loads(text).get("estimate")
        return [s["label"] for s in estimate["stages"] if s["recommended"]] if estimate else []
    if fmt is OutputFormat.MARKDOWN:
        return sorted(set(re.findall(r"\*\*([^*]+)\*\* \(recommended\)", text)))
    if fmt is OutputFormat.HTML:
        return re.findall(r'<tr class="recommended"><td>([^<]+)</td>', text)
    if fmt is OutputFormat.TEXT:
        return [line.split()[1] for line in text.splitlines() if line.startswith("> ")]
    return []  # sarif, github: the verdict sentence alone


def _readable(fmt: OutputFormat, text: str) -> str:
    """The text as a reader sees it: markdown's escaping backslashes and HTML's references undone."""
    if fmt is OutputFormat.MARKDOWN:
        return re.sub(r"\\(.)", r"\1", text)
    return html.unescape(text) if fmt is OutputFormat.HTML else text


def _marked(fmt: OutputFormat, stage: int) -> list[str]:
    return [f"ZeRO-{stage}" if fmt is OutputFormat.TEXT else f"Z{stage}"]


def test_every_format_follows_the_decided_recommendation_and_nothing_else(monkeypatch):
    report = readme_check()
    result = report.result
    decided = result.recommendation
    assert isinstance(decided, Lead) and (decided.code, decided.name) == ("ZA802", "lower-stage-fits")
    assert decided.option is not None and decided.option.option == Option(1) and decided.own is None
    (za802,) = [f for f in result.findings if f.code == "ZA802"]
    assert decided.advice is za802.recommends and decided.patch == za802.fix and decided.cost == za802.recommends.cost
    before = {fmt: _readable(fmt, report.report(fmt)) for fmt in FORMATS}
    other = _another_lead(result)
    replaced = dataclasses.replace(report, result=dataclasses.replace(result, recommendation=other))
    # the advisor's choice is not there to be called again: a renderer that picks would fail here
    for module, name in ((advice_module, "headline"), (advice_module, "failing_findings"),
                         (lead_module, "decide"), (lead_module, "no_fix")):
        monkeypatch.setattr(module, name, _no_callback)
    after = {fmt: _readable(fmt, replaced.report(fmt)) for fmt in FORMATS}
    for fmt in FORMATS:
        if fmt is not OutputFormat.JSON:  # the JSON has the findings' "recommends" and the options' marks
            assert "Recommended (ZA802 lower-stage-fits): ZeRO-1" in before[fmt], fmt
            assert "ZA802 lower-stage-fits): ZeRO-1" not in after[fmt], fmt
            assert "Recommended (ZA804 offload-not-needed): a change nobody searched, peak" in after[fmt], fmt
        if fmt in (OutputFormat.TEXT, OutputFormat.JSON, OutputFormat.MARKDOWN, OutputFormat.HTML):
            assert _recommended_rows(fmt, before[fmt]) == _marked(fmt, 1), fmt
            assert _recommended_rows(fmt, after[fmt]) == _marked(fmt, 2), fmt
    assert "cost: a cost nobody worded" in after[OutputFormat.SARIF]
    # no recommendation at all: no format names one, none marks a column
    none = dataclasses.replace(report, result=dataclasses.replace(result, recommendation=None))
    for fmt in FORMATS:
        text = _readable(fmt, none.report(fmt))
        assert "Recommended (" not in text and _recommended_rows(fmt, text) == [], fmt


def _no_callback(*args, **kwargs):
    raise AssertionError("a renderer called back into the advisor's choice")


def test_the_no_fix_line_is_the_results_field(monkeypatch):
    report = readme_check()
    failing = dataclasses.replace(report, result=dataclasses.replace(
        report.result, recommendation=None, no_fix=NoFix("ZA801", "does-not-fit")))
    monkeypatch.setattr(advice_module, "failing_findings", _no_callback)
    for fmt in (OutputFormat.TEXT, OutputFormat.MARKDOWN, OutputFormat.HTML):
        assert "No config change fits (ZA801 does-not-fit): its finding says what is missing" in \
            _readable(fmt, failing.report(fmt))
        assert "No config change fits" not in report.report(fmt)
    # a run that stops whatever its memory (a trainer's refusal): the line says so, not that nothing fits
    stops = dataclasses.replace(report, result=dataclasses.replace(
        report.result, recommendation=None,
        no_fix=NoFix("ZA814", "trainer-refuses", "the trainer refuses this configuration")))
    for fmt in (OutputFormat.TEXT, OutputFormat.MARKDOWN, OutputFormat.HTML):
        text = " ".join(_readable(fmt, stops.report(fmt)).split())
        assert ("No config change makes it run (ZA814 trainer-refuses: the trainer refuses this configuration): "
                "its finding says what to change") in text, fmt
        assert "No config change fits" not in text


def test_the_recommended_column_is_the_leads_by_identity_not_by_equal_numbers():
    """Two options with the same peak (and the same numbers in every row): only the Lead's column is marked."""
    result = readme_check().result
    estimate = result.estimate
    zero1, zero2 = (next(st for st in estimate.stages if st.option.stage == n and _plain(st.option)) for n in (1, 2))
    twin = dataclasses.replace(zero2, per_gpu=dict(zero1.per_gpu), phases=dict(zero1.phases),
                               per_node_cpu=zero1.per_node_cpu, per_node_nvme=zero1.per_node_nvme)
    assert twin.peak_gpu == zero1.peak_gpu and twin.per_gpu == zero1.per_gpu
    stages = [twin if st is zero2 else st for st in estimate.stages]
    twinned = dataclasses.replace(estimate, stages=stages)
    for marked, other in ((twin, zero1), (zero1, twin)):
        lead = dataclasses.replace(result.recommendation, option=marked)
        assert overview.is_recommended(marked, lead) and not overview.is_recommended(other, lead)
        assert overview.role(other, lead) == ""
        check = dataclasses.replace(result, estimate=twinned, recommendation=lead)
        data = json.loads(render(OutputFormat.JSON, Report(check.findings, check=check)))["estimate"]["stages"]
        assert [s["recommended"] for s in data] == [st is marked for st in stages]
        assert [s["peak_gpu"] for s, st in zip(data, stages, strict=True) if st in (zero1, twin)] == \
            [zero1.peak_gpu] * 2


def test_the_lead_is_decided_on_the_findings_as_reported():
    """The advisor decides once from the findings every report reads; a finding without a fix leads nothing."""
    result = readme_check().result
    assert decide(result.findings, result.estimate) == result.recommendation
    unfixed = [dataclasses.replace(f, fix=None) for f in result.findings]
    assert decide(unfixed, result.estimate) is None


def test_an_estimate_alone_renders_without_a_recommendation():
    estimated = zeroadvisor.estimate(CONFIG, model=MODEL, gpus=8, gpu="A100-SXM4-80GB")
    for fmt in (f for f in FORMATS if f is not OutputFormat.MARKDOWN):
        text = render(fmt, Report([], estimate=estimated.estimate))
        assert "Recommended (" not in text and '"recommended"' not in text and "recommended</" not in text, fmt
        if fmt is not OutputFormat.JSON:  # the estimate's own JSON has no "recommended" key at all
            assert _recommended_rows(fmt, text) == [], fmt


def test_the_best_change_is_timed_once_per_check(monkeypatch):
    """Three advice rules recommend the README check's best change (lower-stage-fits, offload-not-needed, and
    the faster-option check): they share one step time of it, where each used to time it again."""
    timed: list[object] = []
    recommended: list[object] = []
    real_step_time, real_recommend = Searcher.step_time, advice_module.Advice.recommend

    def step_time(self, change, stage):
        timed.append(change)
        return real_step_time(self, change, stage)

    def recommend(self, outcome, reason):
        recommended.append(outcome)
        return real_recommend(self, outcome, reason)

    monkeypatch.setattr(Searcher, "step_time", step_time)
    monkeypatch.setattr(advice_module.Advice, "recommend", recommend)
    result = readme_check().result
    best = result.advice.best
    assert best is not None and len(recommended) == 3 and all(o is best for o in recommended)
    assert sum(1 for change in timed if change is best.change) == 1
    za802, za804 = (next(f.recommends for f in result.findings if f.code == code) for code in ("ZA802", "ZA804"))
    assert za802.step_time is za804.step_time
    assert result.recommendation.step_time is za802.step_time


def test_the_verdict_sentence_of_the_combined_formats_is_the_leads():
    report = readme_check()
    words = overview.recommendation_words(report.result.recommendation, "GiB")
    sarif = json.loads(report.report(OutputFormat.SARIF))
    assert words in sarif["runs"][0]["properties"]["verdict"]
    assert words.replace("%", "%25") in report.report(OutputFormat.GITHUB)  # a workflow command's data escaping


def test_the_runs_own_column_is_the_leads_own():
    """A recommended run no option is (it also moves the micro batch): its own column, in every format that has
    a table, labelled with the Lead's suffix; no option of the estimate is marked."""
    report = readme_check()
    result = report.result
    zero2 = next(st for st in result.estimate.stages if st.option.stage == 2 and _plain(st.option))
    own = dataclasses.replace(zero2, per_gpu=dict(zero2.per_gpu))  # the run's own estimate: another object
    lead = dataclasses.replace(result.recommendation, option=None, own=own, suffix="+mb:1")
    shown = dataclasses.replace(report, result=dataclasses.replace(result, recommendation=lead))
    data = json.loads(shown.report(OutputFormat.JSON))["estimate"]
    assert not any(s["recommended"] for s in data["stages"])
    assert data["recommended_run"]["label"] == "Z2 +mb:1" and data["recommended_run"]["recommended"] is True
    for fmt in (OutputFormat.TEXT, OutputFormat.MARKDOWN, OutputFormat.HTML):
        expected = ["ZeRO-2"] if fmt is OutputFormat.TEXT else ["Z2 +mb:1"]  # text: the option, then its suffix
        assert _recommended_rows(fmt, _readable(fmt, shown.report(fmt))) == expected, fmt
    assert "> ZeRO-2 +mb:1" in shown.report(OutputFormat.TEXT)
