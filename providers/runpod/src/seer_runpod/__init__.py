"""seer-runpod: seer on RunPod pods (:mod:`seer_runpod.provider`), and its test kit,
:mod:`seer_runpod.testing`.

Nothing heavy is imported here: the runpod SDK, paramiko and docker load only when the provider or
the test kit is used.
"""
