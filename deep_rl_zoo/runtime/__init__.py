"""The distributed runtime: actors feeding one learner, on this machine or (later) a Ray cluster.

`interface` holds what agents and backends share (`LearnerLink`, `ActorMessage`, `ActorRuntime`,
`DistributedLearner`); `local` is the process backend; `loop` the training loop that drives any backend.
"""

from deep_rl_zoo.runtime.interface import (
    ActorBuilder,
    ActorMessage,
    ActorRestart,
    ActorRuntime,
    DistributedLearner,
    LearnerLink,
)

__all__ = [
    "ActorBuilder",
    "ActorMessage",
    "ActorRestart",
    "ActorRuntime",
    "DistributedLearner",
    "LearnerLink",
]
