"""The learned side of revbench: which model a name means (``models``), sentence embeddings and
their cache (``embeddings``), keyword profiles (``keywords``) and LoRA training (``training``).

Nothing here imports the flows, tasks or the application; the modules are imported one by one
(this package imports none of them), so a light command pulls in no model library."""
