#!/bin/sh
# /usr/local/bin/ssh of the horovod image: /usr/bin/ssh, with the MPI Operator's ssh key usable
# when a pod fsGroup made it group-readable. images/horovod/Dockerfile.
#
# The operator mounts its ssh Secret at sshAuthMountPath with defaultMode 0600 for /root/.ssh
# (kubeflow/mpi-operator v0.8.2 pkg/controller/mpi_job_controller.go setupSSHOnPod); kubelet
# writes the files as root and, for a pod fsGroup, adds group read to a read-only volume's
# files (kubernetes pkg/volume/volume_linux.go changeFilePermission: mode | 0440), so root's
# ~/.ssh/id_rsa is 0640. ssh ignores a private key that its own user owns and that group or
# others may read (openssh-portable authfile.c sshkey_perm_ok, "UNPROTECTED PRIVATE KEY
# FILE"), so mpirun's ssh to the Workers would fail with "Permission denied (publickey)".
# Such a key is handed to ssh as an owner-only copy (0600, in a 0700 folder of the user's
# own under TMPDIR); any other key is left to ssh as it is.
set -eu
key="${HOME:-/}/.ssh/id_rsa"
if [ -O "$key" ] && [ "$(( 0$(stat -L -c %a "$key") & 077 ))" -ne 0 ]; then
    dir="${TMPDIR:-/tmp}/kfp-gpu-ssh-$(id -u)"
    mkdir -p -m 0700 "$dir"
    if [ -L "$dir" ] || [ ! -O "$dir" ]; then
        echo "kfp-gpu ssh: $dir is not a folder of uid $(id -u); not copying $key" >&2
        exit 255
    fi
    chmod 0700 "$dir"
    tmp="$(mktemp "$dir/id_rsa.XXXXXX")"  # mktemp creates it 0600
    cat "$key" > "$tmp"
    mv -f "$tmp" "$dir/id_rsa"  # rename: concurrent ssh processes never read half a key
    exec /usr/bin/ssh -i "$dir/id_rsa" "$@"
fi
exec /usr/bin/ssh "$@"
