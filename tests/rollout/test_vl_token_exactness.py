"""The token test with images: a Sokoban episode observed as RGB images (render_mode rgb_array) through
VLTrajEnvManager and a tiny Qwen2.5-VL. Its ids hold each turn's image as the expanded placeholder
tokens, it carries every image, and the log-probs recorded at generation equal a fresh forward pass
(the model's own, and the trainer's micro-batched one with 3-D rope positions) to 1e-4."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoTokenizer

from roll.configs.agentic_config import CustomEnvConfig
from roll.configs.worker_config import GeneratingArgs
from roll.data.sequence_packing import split_packed
from roll.models.vision import load_image_processor
from roll.pipeline.agentic.env_manager.vl_traj_env_manager import VLTrajEnvManager
from roll.pipeline.agentic.llm_proxy import PolicyProxy
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from roll.workers.actor_worker import ActorWorker
from roll.workers.infer_worker import InferWorker

from tests.rollout.helpers import infer_config, manager_config
from tests.workers.helpers import actor_config

SOKOBAN_IMAGES = CustomEnvConfig(
    env_type="sokoban", max_steps=4, max_tokens_per_step=10,
    env_config={"max_steps": 4, "dim_room": [6, 6], "num_boxes": 1, "format_penalty": -0.15, "render_mode": "rgb_array"},
)


@pytest.fixture(scope="module")
def episodes(tiny_vl_dir):
    worker = InferWorker(infer_config(tiny_vl_dir))
    tokenizer = AutoTokenizer.from_pretrained(tiny_vl_dir)
    sampling = GeneratingArgs(max_new_tokens=10, do_sample=True, temperature=1.0, top_p=1.0)
    try:
        manager = VLTrajEnvManager("SimpleSokoban", SOKOBAN_IMAGES, manager_config(sampling), tokenizer,
                                   PolicyProxy([worker]), sequence_length=2048)
        trajs = [manager.run_episode(seed=seed, episode_key=str(seed))[0] for seed in (3, 4)]
    finally:
        worker.shutdown()
    return trajs


def test_the_ids_hold_each_turns_image_as_its_placeholder_tokens(episodes, tiny_vl_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_vl_dir)
    processor = load_image_processor(tiny_vl_dir)
    image_id = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    for traj in episodes:
        turns = len(traj.actions)
        assert turns == 4 and traj.vision is not None
        # one image per turn: the first observation and each one after a turn but the last
        assert traj.vision.num_images == turns
        per_image = traj.vision.image_grid_thw.prod(dim=1) // processor.merge_size**2
        assert traj.input_ids.count(image_id) == int(per_image.sum())
        assert sum(traj.response_mask) == traj.generated_tokens > 0
        # the policy never writes an image placeholder (it would be an image without pixels)
        assert not any(t == image_id for t, m in zip(traj.input_ids, traj.response_mask) if m)
        # the stored chat shows where the images are, without their pixels
        users = [m for m in traj.messages if m["role"] == "user"]
        assert [part for m in users for part in m["content"] if part["type"] == "image"] == [{"type": "image"}] * turns


def test_recorded_logprobs_equal_a_fresh_forward_of_the_model(episodes, tiny_vl_dir):
    model = AutoModelForImageTextToText.from_pretrained(tiny_vl_dir).eval()
    for traj in episodes:
        ids = torch.tensor([traj.input_ids])
        with torch.no_grad():  # the model computes its own 3-D positions from the placeholder tokens
            logits = model(input_ids=ids, pixel_values=traj.vision.pixel_values, image_grid_thw=traj.vision.image_grid_thw,
                           mm_token_type_ids=(ids == model.config.image_token_id).int()).logits[0]
        logp = torch.log_softmax(logits.float(), -1)
        fresh = torch.cat([torch.zeros(1), logp[:-1].gather(1, ids[0, 1:, None])[:, 0]])
        mask = torch.tensor(traj.response_mask, dtype=torch.bool)
        recorded = torch.tensor(traj.infer_logprobs)
        assert torch.allclose(fresh[mask], recorded[mask], atol=1e-4), (fresh[mask] - recorded[mask]).abs().max()


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_the_trainers_logprobs_equal_the_recorded_ones(episodes, tiny_vl_dir, layout):
    batch = trajectories_to_batch(episodes, pad_token_id=0)
    assert len(batch["vision"]) == 2
    config = actor_config(tiny_vl_dir, infer_batch_size=2)
    if layout == "packed":
        config = dataclasses.replace(config, use_sequence_packing=True)
        # vision samples are never packed together: one row each
        assert [mb.num_samples for mb in split_packed(batch, 10_000)] == [1, 1]
    worker = ActorWorker(config)
    logprobs = worker.compute_log_probs(batch)["logprobs"]
    mask = batch["response_mask"].bool()
    recorded = batch["infer_logprobs"]
    assert torch.allclose(logprobs[mask], recorded[mask], atol=1e-4), (logprobs[mask] - recorded[mask]).abs().max()
