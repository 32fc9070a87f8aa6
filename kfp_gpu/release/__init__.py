"""What is published: the runtime images' names and tags (:mod:`.images`, the default
:class:`~kfp_gpu.release.images.ImageSet` the components are decorated with) and their
registry digests (:mod:`.digests`, ``kfp-gpu compile --pin-digests``)."""
