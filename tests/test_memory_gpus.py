"""The GPU table (hardware/table.py) and name resolution (hardware/gpus.py): names normalised, names of
several cards of one memory resolved with the assumed variant stated, other ambiguous names refused with
their variants, cloud names matched exactly, every row sourced, figures as the driver reports them."""

from __future__ import annotations

import json
import re

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.hardware.gpus import (
    GPUS,
    PREFIXES,
    AmbiguousGpu,
    UnknownGpu,
    gpu_memory,
    normalise,
    resolve_gpu,
    table_cards,
)
from zeroadvisor.hardware.table import CLOUD_NAMES, ROWS, GpuSpec
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import Cluster

MIB = 2**20


@pytest.mark.parametrize("typed", ["RTX4090", "rtx-4090", "RTX 4090", "rtx_4090", "4090", "NVIDIA GeForce RTX 4090",
                                   "  Rtx-4090 "])
def test_rtx_4090_spellings_resolve(typed):
    assert resolve_gpu(typed).name == "RTX-4090"


@pytest.mark.parametrize("typed", ["H100 SXM5", "h100-sxm", "H100_SXM5_80GB", "h100-sxm-80g",
                                   "NVIDIA H100 80GB HBM3"])  # the last: what nvidia-smi --query-gpu=name prints
def test_h100_sxm_spellings_resolve(typed):
    assert resolve_gpu(typed).name == "H100-SXM5-80GB"


@pytest.mark.parametrize("typed, card", [
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),  # nvidia-smi names (see the issues cited in the table)
    ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla T4", "T4"),
    ("NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB"),
    ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    ("NVIDIA GeForce RTX 5090", "RTX-5090"),
    ("RTX 6000 Ada Generation", "RTX-6000-ADA"),
    ("AMD Instinct MI300X", "MI300X"),
    ("a10g", "A10G"),
    ("A10", "A10"),  # a prefix of A100 and A10G, still its own card
    # what nvidia-smi --query-gpu=name, rocm-smi and hl-smi print for the cards people train on
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
    ("NVIDIA RTX A6000", "RTX-A6000"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA TITAN RTX", "TITAN-RTX"),
    ("Quadro RTX 6000", "QUADRO-RTX-6000"),
    ("Quadro RTX 8000", "QUADRO-RTX-8000"),
    ("NVIDIA RTX A4000", "RTX-A4000"),
    ("NVIDIA RTX A4500", "RTX-A4500"),
    ("NVIDIA RTX A5000", "RTX-A5000"),
    ("NVIDIA RTX A5500", "RTX-A5500"),
    ("NVIDIA GeForce RTX 3080 Ti", "RTX-3080-TI"),
    ("RTX 3080 12GB", "RTX-3080-12GB"),
    ("NVIDIA GeForce RTX 4080", "RTX-4080"),
    ("NVIDIA GeForce RTX 4080 SUPER", "RTX-4080-SUPER"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000-BLACKWELL"),
    ("NVIDIA B300 SXM6 AC", "B300-288GB"),
    ("AMD Instinct MI210", "MI210"),
    ("AMD Instinct MI355X", "MI355X"),
    ("HL-225", "GAUDI2-96GB"),
    ("HL-325L", "GAUDI3-128GB"),
    ("Intel Gaudi 3", "GAUDI3-128GB"),
])
def test_driver_and_marketing_names_resolve(typed, card):
    spec = resolve_gpu(typed)
    assert spec.name == card and spec.assumed_variant is None and spec is GPUS[card]


@pytest.mark.parametrize("typed, card, variants", [
    ("A100-80GB", "A100-SXM4-80GB", {"A100-SXM4-80GB", "A100-PCIE-80GB"}),
    ("A100 80GB", "A100-SXM4-80GB", {"A100-SXM4-80GB", "A100-PCIE-80GB"}),
    ("a100_40g", "A100-SXM4-40GB", {"A100-SXM4-40GB", "A100-PCIE-40GB"}),
    ("V100-32GB", "V100-SXM2-32GB", {"V100-SXM2-32GB", "V100-SXM3-32GB", "V100-PCIE-32GB"}),
    ("NVIDIA H200", "H200-SXM-141GB", {"H200-SXM-141GB", "H200-NVL-141GB"}),  # what nvidia-smi prints
    ("A800-80GB", "A800-SXM4-80GB", {"A800-SXM4-80GB", "A800-PCIE-80GB"}),
])
def test_names_of_cards_with_one_memory_resolve_and_state_the_variant(typed, card, variants):
    spec = resolve_gpu(typed)
    assert spec.name == card and {GPUS[v].memory_mib for v in variants} == {spec.memory_mib}
    line = spec.assumed_variant
    assert line is not None and "\n" not in line and all(v in line for v in variants)
    assert f"the step time assumes {card}" in line and repr(typed) in line
    assert GPUS[card].assumed_variant is None  # the table's row is unchanged; the resolved card carries it
    assert spec.to_dict()["assumed_variant"] == line


def test_the_assumed_variant_is_the_first_listed_and_the_sxm_form():
    """One rule: of cards with one memory, the first in the table, which lists the SXM (NVLink-switched) form
    first: so it has the fastest link of them."""
    order = [spec.name for spec, _ in ROWS]
    resolved = 0
    for _spec, names in ROWS:
        for name in names:
            cards = table_cards(name)
            if len(cards) < 2 or len({GPUS[c].memory_mib for c in cards}) > 1:
                continue
            chosen = resolve_gpu(name)
            resolved += 1
            assert chosen.name == min(cards, key=order.index) == cards[0]
            assert chosen.intra_node_gb_s == max(GPUS[c].intra_node_gb_s for c in cards), name
    assert resolved >= 8


@pytest.mark.parametrize("typed, variants", [
    ("A100", {"A100-SXM4-80GB", "A100-PCIE-80GB", "A100-SXM4-40GB", "A100-PCIE-40GB"}),
    ("A100-PCIe", {"A100-PCIE-80GB", "A100-PCIE-40GB"}),
    ("A100-SXM4", {"A100-SXM4-80GB", "A100-SXM4-40GB"}),
    ("H100-80GB", {"H100-SXM5-80GB", "H100-PCIE-80GB"}),  # the PCIe card's memory: the datasheet's, not the driver's
    ("RTX 3080", {"RTX-3080-10GB", "RTX-3080-12GB"}),
    ("NVIDIA GeForce RTX 3080", {"RTX-3080-10GB", "RTX-3080-12GB"}),  # nvidia-smi prints it for both
    ("RTX 6000", {"RTX-6000-ADA", "QUADRO-RTX-6000"}),
    ("Tesla A100", {"A100-SXM4-80GB", "A100-PCIE-80GB", "A100-SXM4-40GB", "A100-PCIE-40GB"}),  # not Google's name
    ("H100", {"H100-SXM5-80GB", "H100-PCIE-80GB", "H100-NVL-94GB"}),
    ("v100", {"V100-SXM2-32GB", "V100-SXM2-16GB", "V100-SXM3-32GB", "V100-PCIE-32GB", "V100-PCIE-16GB"}),
    ("GH200", {"GH200-96GB", "GH200-144GB"}),
])
def test_ambiguous_names_list_their_variants(typed, variants):
    with pytest.raises(AmbiguousGpu) as caught:
        resolve_gpu(typed)
    assert set(caught.value.variants) == variants
    message = str(caught.value)
    assert "\n" not in message and all(v in message for v in variants)
    assert isinstance(caught.value, ValueError)


def test_unknown_name_is_one_line_with_suggestions():
    with pytest.raises(UnknownGpu) as caught:
        resolve_gpu("H10O")
    assert "\n" not in str(caught.value) and "--gpu-memory" in str(caught.value)
    with pytest.raises(UnknownGpu):
        resolve_gpu("")


def test_every_card_resolves_by_its_canonical_name_and_every_name_is_reachable():
    for spec, names in ROWS:
        assert resolve_gpu(spec.name) is spec
        assert resolve_gpu(spec.name.lower().replace("-", " ")) is spec
        for name in names:  # a name resolves to this row, to a row of the same memory naming it, or is refused
            try:
                found = resolve_gpu(name)
            except AmbiguousGpu as err:
                assert spec.name in err.variants
            else:
                assert found is spec or (found.memory_mib == spec.memory_mib and spec.name in found.assumed_variant)
    assert len(GPUS) == len(ROWS)  # canonical names are unique


def test_ambiguity_only_where_cards_differ():
    """A name shared by rows is refused only where picking one would change a figure a model uses."""
    for _spec, names in ROWS:
        for name in names:
            try:
                resolve_gpu(name)
            except AmbiguousGpu as err:
                figures = {(GPUS[v].memory_mib, GPUS[v].dense_tflops, GPUS[v].intra_node_gb_s,
                            GPUS[v].host_link_gb_s, GPUS[v].memory_gb_s) for v in err.variants}
                assert len(figures) > 1, (name, err.variants)


def test_every_row_has_a_source_and_positive_figures():
    for spec, _ in ROWS:
        assert spec.source and all(re.fullmatch(r"https://\S+", url) for url in spec.source.split()), spec.name
        assert spec.memory_mib > 0 and spec.dense_tflops > 0 and spec.intra_node_gb_s > 0 and spec.host_link_gb_s > 0
        assert isinstance(spec.memory_mib, int)
        assert spec.memory_bytes == spec.memory_mib * MIB
        # sanity bounds: 8 GiB to 512 GiB, 10 to 10,000 dense TFLOPS, links PCIe Gen3 and up
        assert 8 * 1024 <= spec.memory_mib <= 512 * 1024 and 10 <= spec.dense_tflops <= 10_000
        assert spec.host_link_gb_s >= 16 and spec.intra_node_gb_s >= 16


def test_every_row_has_its_memory_bandwidth():
    # GDDR6 T4 (320 GB/s) to HBM3e B200 (8 TB/s); every figure a datasheet's, in GB/s
    for spec, _ in ROWS:
        assert spec.memory_gb_s is not None and 300 <= spec.memory_gb_s <= 8000, spec.name
    # datasheet figures, read off the sources: A100 80GB SXM 2,039 GB/s, PCIe 1,935 GB/s; H100 SXM 3.35 TB/s;
    # H200 4.8 TB/s; V100 900 GB/s; MI300X 5.3 TB/s
    assert GPUS["A100-SXM4-80GB"].memory_gb_s == 2039 and GPUS["A100-PCIE-80GB"].memory_gb_s == 1935
    assert GPUS["H100-SXM5-80GB"].memory_gb_s == 3350 and GPUS["H200-SXM-141GB"].memory_gb_s == 4800
    assert GPUS["V100-SXM2-32GB"].memory_gb_s == 900 and GPUS["MI300X"].memory_gb_s == 5300
    assert GPUS["A100-SXM4-80GB"].to_dict()["memory_gb_s"] == 2039


def test_memory_is_what_the_driver_reports():
    # nvidia-smi memory.total, read from public outputs (the table's comments link each):
    assert gpu_memory("H100-SXM5-80GB") == 81559 * MIB  # modal-labs/modal-client#2797, google/gvisor#10413
    assert gpu_memory("A100-SXM4-80GB") == 81920 * MIB  # modal-labs/modal-client#2797, NVIDIA/mig-parted#31
    assert gpu_memory("A100-SXM4-40GB") == 40960 * MIB  # modal-labs/modal-client#2797 (driver 580: 40960)
    assert gpu_memory("L40S") == 46068 * MIB and gpu_memory("L4") == 23034 * MIB and gpu_memory("T4") == 15360 * MIB
    assert gpu_memory("RTX 4090") == 24564 * MIB  # RLinf/RLinf#255
    assert gpu_memory("RTX 3090") == 24576 * MIB  # noonghunna/club-3090#1128
    assert gpu_memory("RTX 5090") == 32607 * MIB  # noonghunna/club-3090#617
    assert gpu_memory("H100 NVL") == 95830 * MIB  # NVIDIA/gpu-admin-tools#4
    assert gpu_memory("B200") == 183359 * MIB  # NVIDIA/TensorRT-LLM#10278
    assert gpu_memory("A10G") == 23028 * MIB  # NVIDIA/DCGM#232
    # where no driver figure was found, the datasheet's GB: H20 96 GB = 96e9 bytes, rounded down to MiB
    assert gpu_memory("H20") == (96 * 10**9 // MIB) * MIB


def test_dense_tflops_are_half_the_sparse_headline():
    # datasheets: H100 SXM bf16 1,979 TFLOPS with sparsity; A100 bf16 312 dense (624 sparse); L4 242 sparse
    assert resolve_gpu("H100-SXM5-80GB").dense_tflops == 989.5
    assert resolve_gpu("A100-SXM4-40GB").dense_tflops == 312
    assert resolve_gpu("L4").dense_tflops == 121
    # NVLink 4 is 900 GB/s bidirectional: 450 each way; H800's is cut to 400 bidirectional
    assert resolve_gpu("H100 SXM").intra_node_gb_s == 450 and resolve_gpu("H800 SXM").intra_node_gb_s == 200


@pytest.mark.parametrize("cloud, card", sorted(CLOUD_NAMES.items()))
def test_cloud_names_resolve_exactly(cloud, card):
    assert resolve_gpu(cloud) is GPUS[card] and resolve_gpu(f" {cloud.upper()} ") is GPUS[card]


def test_new_rows_carry_their_datasheet_figures():
    assert GPUS["GAUDI3-128GB"].dense_tflops == 1835 and GPUS["GAUDI3-128GB"].intra_node_gb_s == 525  # 21 x 200Gb/s
    assert GPUS["GAUDI2-96GB"].dense_tflops == 432 and GPUS["GAUDI2-96GB"].intra_node_gb_s == 262.5
    assert GPUS["MI355X"].dense_tflops == 2516.6 and GPUS["MI355X"].memory_gb_s == 8000
    assert GPUS["MI210"].dense_tflops == 181 and GPUS["MI210"].memory_gb_s == 1600
    assert GPUS["B300-288GB"].dense_tflops == 2250 and GPUS["B300-288GB"].intra_node_gb_s == 900
    assert GPUS["RTX-A4000"].dense_tflops == 153.4 / 2 and GPUS["RTX-3080-10GB"].dense_tflops == 59.5
    assert gpu_memory("Quadro RTX 8000") == 48601 * MIB and gpu_memory("TITAN RTX") == 24219 * MIB  # lambdal#11
    assert GPUS["QUADRO-RTX-6000"].memory_bytes == (24 * 10**9 // MIB) * MIB  # no driver figure: the datasheet's
    assert gpu_memory("V100-PCIE-32GB") == 32768 * MIB  # akash-network/provider-configs#90


def test_normalise_strips_every_prefix():
    for word in PREFIXES:
        assert normalise(f"{word.title()} L4") == "L4" and resolve_gpu(f"{word} L4") is GPUS["L4"]
    assert normalise("Quadro RTX 6000") != normalise("RTX 6000")  # Quadro is a name, not a vendor word


def test_extra_cards_resolve_by_their_names_first():
    mine = GpuSpec("My-Card", 40960, 100.0, 64.0, 32.0, "declared")
    assert resolve_gpu("my card", [mine]) is mine and resolve_gpu("L4", [mine]) is GPUS["L4"]
    with pytest.raises(UnknownGpu) as caught:
        resolve_gpu("My-Crad", [mine])
    assert "My-Card" in str(caught.value)


def test_normalise_is_idempotent_and_ignores_vendor_words():
    for spec, names in ROWS:
        for name in (spec.name, *names):
            assert normalise(normalise(name)) == normalise(name)
    assert normalise("NVIDIA Tesla V100-SXM2-16GB") == normalise("v100 sxm2 16g")


def test_cluster_carries_the_card():
    card = resolve_gpu("A100-SXM4-80GB")
    cluster = Cluster(gpus=8, gpu=card)
    assert cluster.gpu_memory == 81920 * MIB
    assert cluster.to_dict()["gpu"]["name"] == "A100-SXM4-80GB"
    assert Cluster(gpus=8, gpu_memory=80 * 10**9).to_dict()["gpu"] is None
    with pytest.raises(EstimateError):
        Cluster(gpus=8, gpu=card, gpu_memory=80 * 10**9)


@pytest.fixture
def ds(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{"zero_optimization": {"stage": 2}, "bf16": {"enabled": true}}')
    return path


@pytest.mark.parametrize("command", ["estimate", "check"])
def test_cli_ambiguous_gpu_exits_2_listing_variants(cli, ds, command):
    config = [ds]
    result = cli(command, *config, "--params", "7B", "--gpus", "8", "--gpu", "A100")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--gpu" in lines[0]
    assert all(v in lines[0] for v in ("A100-SXM4-80GB", "A100-PCIE-80GB", "A100-SXM4-40GB", "A100-PCIE-40GB"))


def test_cli_json_and_text_name_the_card(cli, ds):
    result = cli("estimate", ds, "--params", "7B", "--gpus", "8", "--gpu", "rtx_4090", "-f", "json")
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["cluster"]["gpu"]
    assert gpu["name"] == "RTX-4090" and gpu["memory_bytes"] == 24564 * MIB and gpu["dense_tflops"] == 165.2
    text = cli("estimate", ds, "--params", "7B", "--gpus", "8", "--gpu", "rtx_4090").stdout
    assert "RTX-4090" in text
    bare = cli("estimate", ds, "--params", "7B", "--gpus", "8", "--gpu-memory", "24GB", "-f", "json")
    assert json.loads(bare.stdout)["cluster"]["gpu"] is None


def test_cli_check_takes_a_name_of_one_memory_and_warns_of_the_variant(cli, ds):
    result = cli("check", ds, "--params", "7B", "--gpus", "8", "--gpu", "A100-80GB", "--seq-len", "2048",
                 "--fail-on", "never", "-f", "json")
    assert result.returncode == 0, result.stderr
    estimate = json.loads(result.stdout)["estimate"]
    assert estimate["cluster"]["gpu"]["name"] == "A100-SXM4-80GB"
    assumed = [a for a in estimate["assumed"] if a["name"] == "gpu_variant"]
    assert len(assumed) == 1 and "A100-PCIE-80GB" in assumed[0]["effect"] and assumed[0]["flag"] == "--gpu"


def test_the_step_time_notes_and_assumed_inputs_carry_the_variant():
    from zeroadvisor.hardware.machine import Hardware
    from zeroadvisor.memory.assumed import hardware_assumptions, hardware_notes

    card = resolve_gpu("V100-32GB")
    (assumed,) = hardware_assumptions(Hardware(card))
    assert (assumed.name, assumed.value, assumed.flag) == ("gpu_variant", "V100-SXM2-32GB", "--gpu")
    assert "V100-PCIE-32GB" in assumed.message() and "\n" not in assumed.message()
    assert any("V100-SXM3-32GB" in note for note in hardware_notes(Hardware(card)))
    assert hardware_assumptions(Hardware(GPUS["V100-SXM2-32GB"])) == []  # the full name: nothing assumed


def test_the_manual_counts_the_table():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "check.md").read_text("utf-8")
    assert f"lists the {len(ROWS)}\ncards" in text or f"lists the {len(ROWS)} cards" in text
