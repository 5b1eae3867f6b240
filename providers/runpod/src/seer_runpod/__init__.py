"""seer-runpod: seer on RunPod. For now it holds the test kit, :mod:`seer_runpod.testing`.

Nothing heavy is imported here: the runpod SDK, paramiko and docker load only when the test kit
(or, later, the provider) is used.
"""
