"""`doctor fleet`: one report for many nodes, over torch.distributed (torchrun, srun, mpirun).

launcher (which launcher, which rank) → network (this node's readiness, via Host) → gather (one
`doctor check` per node, joined through the store, all_gather_object over gloo) → collectives and a
data-parallel step → doctor/diagnose/fleet.py turns it all into findings. torch is imported
inside functions only.
"""
