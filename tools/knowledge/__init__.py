"""Knowledge tools: search and read the documents of the user's knowledge folders."""
