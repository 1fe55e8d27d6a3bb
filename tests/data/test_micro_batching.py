"""Planning micro-batches: every sample exactly once, budgets and widths respected, results back in order."""

from __future__ import annotations

import pytest
import torch

from roll.data.batch import Batch
from roll.data.dynamic_batching import plan_dynamic_batches, split_dynamic
from roll.data.micro_batch import sample_lengths, scatter_to_batch, split_padded
from roll.data.sequence_packing import plan_packing, split_packed
from tests.workers.helpers import LENGTHS, make_batch


def test_dynamic_plan_respects_budget_and_rounding():
    lengths = [100, 5, 64, 63, 1, 200, 30, 31]
    plan = plan_dynamic_batches(lengths, max_tokens_per_microbatch=256, sequence_length_round=16)
    assert sorted(i for group, _ in plan for i in group) == list(range(len(lengths)))
    for group, width in plan:
        assert width % 16 == 0 and width >= max(lengths[i] for i in group)
        # only a sample longer than the budget may exceed it, and then alone
        assert len(group) * width <= 256 or len(group) == 1
    # sorted by length: each micro-batch is padded to similar lengths, far less than plain padding
    assert sum(len(g) * w for g, w in plan) < len(lengths) * 208


def test_dynamic_plan_splits_to_reach_a_minimum_count():
    plan = plan_dynamic_batches([10] * 6, max_tokens_per_microbatch=1000, min_num_micro_batches=4)
    assert len(plan) == 4
    assert sorted(i for g, _ in plan for i in g) == list(range(6))


def test_packing_plan_fills_rows_without_splitting_samples():
    lengths = [50, 50, 30, 20, 90, 120, 10]
    rows = plan_packing(lengths, max_packed_length=100)
    assert sorted(i for r in rows for i in r) == list(range(len(lengths)))
    for r in rows:
        assert sum(lengths[i] for i in r) <= 100 or len(r) == 1
    assert len(rows) == 4  # 370 tokens, one of them 120 long: 120 | 90+10 | 50+50 | 30+20
    assert len(plan_packing(lengths, 1000, min_num_rows=3)) == 3


@pytest.mark.parametrize("split", [
    lambda b: split_padded(b, 3),
    lambda b: split_dynamic(b, 64, 8),
    lambda b: split_packed(b, 50),
])
def test_unpack_and_scatter_restore_the_batch(split):
    batch = make_batch()
    ids = batch.tensors["input_ids"].float()
    micro_batches = split(batch)
    assert sorted(i for mb in micro_batches for i in mb.sample_indices) == list(range(len(batch)))
    # the row tensors carry each sample's tokens; unpack + scatter must rebuild the batch exactly
    # (position 0 is 0 by roll's convention, so compare from position 1)
    outputs = [mb.unpack(mb.input_ids.float()) for mb in micro_batches]
    rebuilt = scatter_to_batch(micro_batches, outputs, len(batch), ids.shape[1])
    assert torch.equal(rebuilt[:, 1:], ids[:, 1:])
    assert (rebuilt[:, 0] == 0).all()
    for mb in micro_batches:
        assert torch.equal(mb.gather(batch.tensors["input_ids"])[:, 1:].float(), mb.unpack(mb.input_ids.float())[:, 1:])
        # to_rows puts per-sample values back where the model sees their tokens, bar each first token
        per_sample = mb.gather(batch.tensors["input_ids"])
        rows = mb.to_rows(per_sample)
        assert rows.shape == mb.input_ids.shape
        first_tokens = [(row, start) for row, start, _ in mb.segments]
        assert all(rows[r, s] == 0 for r, s in first_tokens)
        expected = mb.input_ids.clone()
        for r, s in first_tokens:
            expected[r, s] = 0
        assert torch.equal(rows, expected)


def test_packed_rows_restart_positions_and_drop_the_mask():
    batch = make_batch([5, 3, 4])
    (mb,) = split_packed(batch, 20)
    assert mb.model_inputs()["attention_mask"] is None and mb.model_inputs()["use_cache"] is False
    assert mb.input_ids.shape == (1, 12)
    assert mb.position_ids[0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2]


def test_left_padding_is_refused_with_a_clear_error():
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="right-padded"):
        sample_lengths(mask)
    with pytest.raises(ValueError, match="max_tokens_per_microbatch"):
        split_dynamic(Batch({"input_ids": mask, "attention_mask": torch.ones_like(mask)}), 0)


def test_dynamic_batching_cuts_padding_on_mixed_lengths():
    batch = make_batch(LENGTHS * 4)
    plain = sum(mb.num_tokens for mb in split_padded(batch, 4))
    dynamic = sum(mb.num_tokens for mb in split_dynamic(batch, 160, 8))
    packed = sum(mb.num_tokens for mb in split_packed(batch, 160))
    useful = sum(LENGTHS) * 4
    assert dynamic < 0.75 * plain and packed < 1.1 * useful <= plain


def test_samples_of_one_length_and_one_prompt_are_neighbours():
    # a shuffled mini-batch of GRPO's shape: two prompts (7 and 9), replies of one length
    prompts = [7, 9, 7, 9, 9, 7, 7, 9]
    ids = torch.tensor([[p] * 5 + [i] for i, p in enumerate(prompts)])
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    (first, _), (second, _) = plan_dynamic_batches([6] * 8, 24, tokens=ids.tolist())
    assert {prompts[i] for i in first} == {7} and {prompts[i] for i in second} == {9}
    assert [sorted(mb.sample_indices) for mb in split_dynamic(batch, 24)] == [sorted(first), sorted(second)]


def test_fixed_size_micro_batches_put_the_answers_of_one_prompt_together():
    # two prompts, four answers each, shuffled apart as a mini-batch draws them
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(5, 100, (12,), generator=g) for _ in range(2)]
    rows = [torch.cat([prompts[k], torch.randint(5, 100, (4,), generator=g)]) for k in (0, 1, 1, 0, 1, 0, 0, 1)]
    ids = torch.stack(rows)
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    micro_batches = split_padded(batch, 4)
    assert [sorted(mb.sample_indices) for mb in micro_batches] in ([[0, 3, 5, 6], [1, 2, 4, 7]], [[1, 2, 4, 7], [0, 3, 5, 6]])
    assert all(mb.input_ids.shape == (4, 16) for mb in micro_batches)
