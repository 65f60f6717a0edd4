"""Repair: the model-facing message for a rejected call, the memory of rejections, and the repair loop measured."""
