"""Knowledge: folders of documents indexed for search by words and by meaning.

Nothing here is imported at start-up: the index, the vector extension and the embedder load
on first use (a test guards the start-up imports).
"""
