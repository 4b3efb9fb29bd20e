"""The built-in engine: Deskhand runs GGUF models itself in a child process it owns.

gguf reads a model file's header, catalogue lists the curated models and picks one for this
machine, store keeps the models this home has, download fetches them and engine runs them.
Nothing here is imported at start-up; heavy libraries are imported inside functions.
"""
