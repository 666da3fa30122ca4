"""Predict activation/static memory per pipeline stage and plan the fastest strategy under a budget.

* :mod:`.spec` reads the model and parallel sizes from the YAML;
* :mod:`.family` holds what one decoder layer keeps for backward (data: ``<family>.yaml`` here) and
  what a recompute / swap choice leaves of it, resolved on the family's real cell tree;
* :mod:`.model` adds static memory and the pipeline schedule into a peak per stage (``estimate``);
* :mod:`.calibrate` fits the free terms to measured peaks of real runs (``--calibrate``);
* :mod:`.search` chooses per layer under a budget, :mod:`.emit` writes the YAML (``plan``).
"""
