#!/bin/bash
# Builds the all-in-one's image: Debian's OpenStack (Zed) in a root tree that
# boots with systemd as PID 1 in podman, databases made and migrated here so
# that a start only bootstraps keystone and starts the services.
#   build.sh ROOT IMAGE SUITE
# ROOT: an empty folder to build in (the caller removes it); IMAGE: the tag.
# Called by refarch/clouds/aio/__init__.py (ensure_image), which keys IMAGE
# on this folder's files.  One image serves both modes (aio-firstboot's
# MODE): Nova's fake driver, or real guests under QEMU's TCG through libvirt
# with Neutron's Linux bridge and L3 agents; nova-compute runs with the
# suite's unit either way.
set -euo pipefail
ROOT=$1; IMAGE=$2; SUITE=$3
HERE=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
step() { echo "[aio-build +$(( $(date +%s) - T0 ))s] $*"; }
umount_all() { for m in dev/pts dev proc sys; do mountpoint -q "$ROOT/$m" && umount -l "$ROOT/$m" || true; done; }
trap umount_all EXIT

step "debootstrap $SUITE"
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,python3,iproute2,ca-certificates \
    "$SUITE" "$ROOT"
mount -t proc proc "$ROOT/proc"
mount -t sysfs sysfs "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
in_root() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"; }

# Nothing may start while packages install; the databases are the suite's.
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "$HERE/etc/debconf-preseed.txt" "$ROOT/tmp/preseed.txt"
step "apt-get install (Debian's OpenStack, MariaDB, RabbitMQ, memcached)"
in_root apt-get update -q
in_root apt-get install -y -q --no-install-recommends debconf-utils
in_root debconf-set-selections /tmp/preseed.txt
in_root apt-get install -y -q --no-install-recommends mariadb-server python3-pymysql rabbitmq-server \
    memcached python3-memcache keystone glance-api placement-api nova-api nova-conductor nova-scheduler \
    python3-nova neutron-server python3-openstackclient python3-openstacksdk curl procps \
    nova-compute-qemu libvirt-daemon-system qemu-utils genisoimage neutron-linuxbridge-agent neutron-l3-agent neutron-dhcp-agent dnsmasq-base \
    iptables ebtables ipset conntrack sudo iputils-ping netcat-openbsd
in_root apt-get clean
rm -rf "$ROOT/var/lib/apt/lists/"* "$ROOT/tmp/preseed.txt"

step "configuration"
install -m 640 "$HERE/etc/keystone.conf" "$ROOT/etc/keystone/keystone.conf"
install -m 640 "$HERE/etc/glance-api.conf" "$ROOT/etc/glance/glance-api.conf"
install -m 640 "$HERE/etc/placement.conf" "$ROOT/etc/placement/placement.conf"
install -m 640 "$HERE/etc/nova.conf" "$ROOT/etc/nova/nova.conf"
install -m 640 "$HERE/etc/neutron.conf" "$ROOT/etc/neutron/neutron.conf"
install -m 640 "$HERE/etc/ml2_conf.ini" "$ROOT/etc/neutron/plugins/ml2/ml2_conf.ini"
install -m 640 "$HERE/etc/linuxbridge_agent.ini" "$ROOT/etc/neutron/plugins/ml2/linuxbridge_agent.ini"
install -m 640 "$HERE/etc/l3_agent.ini" "$ROOT/etc/neutron/l3_agent.ini"
install -m 640 "$HERE/etc/dhcp_agent.ini" "$ROOT/etc/neutron/dhcp_agent.ini"
install -m 644 "$HERE/etc/libvirt-qemu.conf" "$ROOT/etc/libvirt/qemu.conf"
# No libvirt network: Neutron plugs the guests.
rm -f "$ROOT"/etc/libvirt/qemu/networks/autostart/*.xml
in_root usermod -a -G libvirt,kvm nova
in_root chgrp keystone /etc/keystone/keystone.conf
in_root chgrp glance /etc/glance/glance-api.conf
in_root chgrp placement /etc/placement/placement.conf
in_root chgrp nova /etc/nova/nova.conf
in_root chgrp neutron /etc/neutron/neutron.conf /etc/neutron/plugins/ml2/ml2_conf.ini \
    /etc/neutron/plugins/ml2/linuxbridge_agent.ini /etc/neutron/l3_agent.ini /etc/neutron/dhcp_agent.ini
# Few uwsgi workers per API; no AppArmor in a container.  keystone and
# placement take threads; nova-api and neutron-api use eventlet, whose
# greenlets cannot switch between uwsgi threads ("greenlet.error: cannot
# switch to a different thread": Terraform's second concurrent server
# create hung): two single-threaded processes each.
for ini in /etc/keystone/keystone-uwsgi.ini /etc/placement/placement-api-uwsgi.ini; do
    sed -i -e 's/^processes *=.*/processes = 1/' -e 's/^threads *=.*/threads = 8/' \
           -e 's/^plugins *=.*/plugins = python3/' -e '/^apparmor-profile/d' "$ROOT$ini"
done
for ini in /etc/nova/nova-api-uwsgi.ini /etc/neutron/neutron-api-uwsgi.ini; do
    sed -i -e 's/^processes *=.*/processes = 2/' -e 's/^threads *=.*/threads = 1/' \
           -e 's/^plugins *=.*/plugins = python3/' -e '/^apparmor-profile/d' "$ROOT$ini"
done
install -m 644 "$HERE/ml2/refarch_aio_ml2.py" "$ROOT/usr/lib/python3/dist-packages/refarch_aio_ml2.py"
cp -r "$HERE/ml2/refarch_aio_ml2-1.0.dist-info" "$ROOT/usr/lib/python3/dist-packages/"
install -m 644 "$HERE/etc/nova-compute.service" "$ROOT/etc/systemd/system/nova-compute.service"
install -m 755 "$HERE/bin/aio-firstboot" "$ROOT/usr/local/sbin/aio-firstboot"
install -m 755 "$HERE/bin/aio-services.py" "$ROOT/usr/local/sbin/aio-services.py"
mkdir -p "$ROOT"/var/lib/glance/{images,staging,tasks_work_dir,lock} "$ROOT"/var/lib/nova/{tmp,instances} \
    "$ROOT/var/lib/neutron/lock"
in_root chown -R glance:glance /var/lib/glance
in_root chown -R nova:nova /var/lib/nova
in_root chown -R neutron:neutron /var/lib/neutron
cat > "$ROOT/etc/mysql/mariadb.conf.d/99-refarch-aio.cnf" <<'CNF'
[mysqld]
bind-address = 127.0.0.1
max_connections = 500
innodb_buffer_pool_size = 64M
performance_schema = off
skip-name-resolve
CNF
echo "NODENAME=rabbit@aio" > "$ROOT/etc/rabbitmq/rabbitmq-env.conf"
echo aio > "$ROOT/etc/hostname"

step "databases and migrations"
mkdir -p "$ROOT/run/mysqld"
in_root chown mysql:mysql /run/mysqld
in_root /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/build.pid &
for _ in $(seq 60); do in_root mysqladmin ping >/dev/null 2>&1 && break; sleep 1; done
SQL=""
for db in keystone glance placement nova_api nova nova_cell0 neutron; do
    user=$db; case $db in nova*) user=nova ;; esac
    SQL="$SQL CREATE DATABASE $db; GRANT ALL ON $db.* TO '$user'@'localhost' IDENTIFIED BY 'refarch-aio-db';"
    SQL="$SQL GRANT ALL ON $db.* TO '$user'@'127.0.0.1' IDENTIFIED BY 'refarch-aio-db';"
done
in_root mysql -e "$SQL FLUSH PRIVILEGES;"
as() { in_root su -s /bin/sh -c "$2" "$1"; }
as keystone "keystone-manage db_sync"
as glance "glance-manage db_sync"
as placement "placement-manage db sync"
as nova "nova-manage api_db sync"
as nova "nova-manage cell_v2 map_cell0"
as nova "nova-manage cell_v2 create_cell --name=cell1"
as nova "nova-manage db sync"
as neutron "neutron-db-manage --config-file /etc/neutron/neutron.conf \
    --config-file /etc/neutron/plugins/ml2/ml2_conf.ini upgrade heads"
in_root mysqladmin shutdown
wait

step "units"
for unit in getty@tty1.service console-getty.service systemd-udevd.service systemd-udev-trigger.service \
            systemd-logind.service systemd-remount-fs.service apt-daily.timer apt-daily-upgrade.timer \
            e2scrub_all.timer e2scrub_reap.service fstrim.timer nova-api-metadata.service; do
    in_root systemctl mask "$unit" >/dev/null 2>&1 || true
done
in_root systemctl enable mariadb.service rabbitmq-server.service memcached.service >/dev/null 2>&1 || true
# The OpenStack services start from aio-firstboot, after keystone's bootstrap.
for unit in keystone glance-api placement-api nova-api nova-conductor nova-scheduler nova-compute \
            neutron-api neutron-rpc-server neutron-linuxbridge-agent neutron-l3-agent neutron-dhcp-agent neutron-metadata-agent \
            libvirtd virtqemud virtlogd libvirt-guests iscsid open-iscsi haproxy keepalived radvd dnsmasq; do
    in_root systemctl disable "$unit.service" >/dev/null 2>&1 || true
done
# A container cannot raise its limits above podman run's --ulimit.
for f in "$ROOT"/lib/systemd/system/*.service; do
    grep -qE '^Limit(NOFILE|MEMLOCK)=' "$f" || continue
    d="$ROOT/etc/systemd/system/$(basename "$f").d"
    mkdir -p "$d"
    { echo "[Service]"
      grep -q '^LimitNOFILE=' "$f" && echo "LimitNOFILE=16384"
      grep -q '^LimitMEMLOCK=' "$f" && echo "LimitMEMLOCK=8M"
    } > "$d/10-container-limits.conf"
done
rm -f "$ROOT/usr/sbin/policy-rc.d" "$ROOT/etc/resolv.conf"
: > "$ROOT/etc/machine-id"
umount_all

step "podman import $IMAGE"
tar -C "$ROOT" --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -c . \
    | podman import --change 'CMD ["/sbin/init"]' --message "refarch $IMAGE" - "$IMAGE" >/dev/null
step "done"
