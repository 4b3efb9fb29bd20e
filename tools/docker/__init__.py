"""Docker tools: containers, images, volumes and networks on the active Docker host.

`manifest.py` is cheap; the other modules import the docker SDK and load on first call.
"""
