"""The run machinery the three applications share, apart from the loss core.

* :mod:`~shared_losses.training.runtime`: atomic checkpoints, resumable CSV logs, run folders, signals,
  devices and trackers (the only part of ``shared_losses`` that writes files);
* :mod:`~shared_losses.training.harness`: one run's folder, logs, checkpoints and resume rules;
* :mod:`~shared_losses.training.loop`: the training loop the applications run in;
* :mod:`~shared_losses.training.cli`: command lines from config dataclasses, one ``error:`` line for bad input;
* :mod:`~shared_losses.training.sweep`: grids of runs in worker processes;
* :mod:`~shared_losses.training.stats`: mean ± std over seeds and paired differences between runs.

It imports the loss core (never the other way round) and ``accelerate`` only when used.
"""
