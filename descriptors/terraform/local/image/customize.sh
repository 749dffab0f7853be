#!/bin/sh
# Turns a debootstrap tree into a node image for the local cloud: a VM-like
# container with systemd as PID 1 and sshd whose host keys are made per node
# at first boot.  Runs chrooted into the tree ($1 is unused, kept for logs).
set -eu

# No host keys in the image: every node makes its own at first boot.
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
cat > /etc/systemd/system/ssh.service.d/10-hostkeys.conf <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
systemctl enable ssh.service

# Cloud images come with an unprivileged admin user with passwordless sudo;
# the local image does the same (its authorized key is added per run).
id debian >/dev/null 2>&1 || useradd -m -s /bin/bash debian
echo 'debian ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-cloud-admin
chmod 0440 /etc/sudoers.d/90-cloud-admin
passwd -l root

# Units that make no sense in a container.
systemctl mask getty@tty1.service console-getty.service systemd-udevd.service \
    systemd-udev-trigger.service systemd-remount-fs.service sys-kernel-debug.mount \
    systemd-logind.service >/dev/null 2>&1 || true

# systemd makes a fresh machine id on first boot.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > /etc/hosts
apt-get clean
rm -rf /var/lib/apt/lists/*
