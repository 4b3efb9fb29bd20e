"""The conversation view: model, rendering and painting of messages and tool cards."""
