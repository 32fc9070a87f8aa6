"""The cluster side: one job from creation to its end, over the Kubernetes API.

Read in order (build -> launch -> watch -> cancel):

1. :mod:`.launcher`: :func:`~.launcher.launch`, the whole story for one job spec from
   :mod:`kfp_gpu.mpi.spec`; its ``__main__`` is the launcher image's entry point.
2. :mod:`.attach`: create the job under its deterministic name, or re-attach to it on 409
   (a retried KFP task), and hand the ownerReference over (:mod:`.owner`); :mod:`.records`
   writes what was created and reads phases and outcomes.
3. :mod:`.watch`: wait for the end (watch with resume, poll as fallback), with
   :mod:`.pending` bounding how long the job may stay unscheduled (reads pod events),
   :mod:`.preemption` saying what a job suspended after it ran (Kueue preemption) waits
   for, and :mod:`.logs` streaming the Launcher's log (:mod:`.metrics` reads the trainer's
   figures).
4. :mod:`.cancel`: on SIGTERM (KFP's Terminate), delete the job first, then the rest.

Every API call goes through :mod:`.jobs_api` with request timeouts and :mod:`.retry`'s
bounded backoff.
"""
