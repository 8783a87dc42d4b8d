"""Federated learning with privacy: privfed's simulator (``privfed fl train``,
``docs/FEDERATED_LEARNING.md``) and its models, for Python.

``train(config)`` runs a whole configured run and returns the report of
``privfed fl train --json``; ``Trainer`` runs it a round at a time; ``Model`` is one of the
simulator's models on its own (softmax regression, MLP, CNN / LeNet-5, character GRU) with
init, loss and gradient, evaluation and local SGD, so a device (e.g. a Flower client) trains with
privfed's models without torch::

    from privfed import fl
    report = fl.train("examples/fl/quickstart.toml", out_dir="runs/q")    # resumable
    report["final_accuracy"], report["final_epsilon"]

    t = fl.Trainer({"rounds": 5, "seed": 1, "data": {...}, "model": {...}, ...})
    while (record := t.step()) is not None:
        print(record["round"], record["epsilon"])
    t.save_checkpoint("ckpt.bin")

A config is TOML text, a path to a TOML file, or a dict of the same form. Training runs without
the GIL; bad configs or data raise :class:`privfed.errors.ConfigError`; ``Trainer.step`` raises
:class:`privfed.errors.PrivacyBudgetExceeded` when the budget stops training and
:class:`privfed.errors.TrainingDiverged` when training diverges (``train`` and ``Trainer.run`` end
normally in both cases, with ``stopped`` — its ``kind``, ``round`` and ``reason`` — in the
summary).
"""

from . import _privfed as _native

Trainer = _native.Trainer
Model = _native.Model
train = _native.train
train.__module__ = __name__

__all__ = ["Trainer", "Model", "train"]
