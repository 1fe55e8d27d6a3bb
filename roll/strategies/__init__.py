"""Train and inference strategies, chosen by `strategy_args.strategy_name` (facts in registry.py)."""

from roll.strategies.registry import (
    STRATEGIES,
    StrategyFacts,
    allowed_strategies,
    check_strategy_available,
    create_infer_strategy,
    create_train_strategy,
    register_strategy,
    strategy_facts,
    strategy_problem,
)

__all__ = [
    "STRATEGIES",
    "StrategyFacts",
    "allowed_strategies",
    "check_strategy_available",
    "create_infer_strategy",
    "create_train_strategy",
    "register_strategy",
    "strategy_facts",
    "strategy_problem",
]
