"""A worker for the thread-budget test: it reports the torch threads its process was given."""

import torch


class ThreadProbe:
    def __init__(self, worker_config, rank: int, world_size: int) -> None:
        self.rank = rank

    def threads(self) -> int:
        return torch.get_num_threads()
