// SPDX-License-Identifier: GPL-2.0
/*
 * Sends malformed NVMe passthrough commands that nvme-cli cannot produce (bad user pointers,
 * impossible lengths) to a controller or namespace character device, and checks that each is
 * refused with the expected errno or an NVMe error status, never accepted.
 *
 *   passthru-abuse /dev/nvmeN|/dev/ngXnY
 *
 * Prints one line per case and exits 0 only if every case was refused as expected.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int failures;

/* Runs one command: refused means the ioctl failed with one of the errnos in `ok_errnos` (0
 * terminated), or returned a positive NVMe status when `status_ok` is set. */
static void expect_refused(int fd, const char *what, unsigned long req,
			   struct nvme_passthru_cmd *cmd, const int *ok_errnos, int status_ok)
{
	int ret = ioctl(fd, req, cmd);
	int e = errno;

	if (ret > 0 && status_ok) {
		printf("ok   %s: NVMe status %#x\n", what, ret);
		return;
	}
	if (ret < 0) {
		for (const int *ok = ok_errnos; *ok; ok++) {
			if (e == *ok) {
				printf("ok   %s: %s\n", what, strerror(e));
				return;
			}
		}
		printf("FAIL %s: unexpected error %s\n", what, strerror(e));
	} else {
		printf("FAIL %s: accepted (returned %d)\n", what, ret);
	}
	failures++;
}

int main(int argc, char **argv)
{
	static const int efault[] = { EFAULT, 0 };
	static const int any[] = { EINVAL, EFAULT, ENOMEM, EIO, EACCES, EPERM, 0 };
	static char buf[4096];
	struct nvme_passthru_cmd cmd;
	int fd;

	if (argc != 2 || !strncmp(argv[1], "-", 1)) {
		fprintf(stderr, "usage: %s /dev/nvmeN|/dev/ngXnY\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}

	/* Identify Controller into an address no process can own. */
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = 0x06;
	cmd.cdw10 = 1;
	cmd.addr = (uint64_t)(uintptr_t)0x10;
	cmd.data_len = 4096;
	expect_refused(fd, "identify into a bad pointer", NVME_IOCTL_ADMIN_CMD, &cmd, efault, 0);

	/* Identify into a kernel address. */
	cmd.addr = 0xffffffff81000000ULL;
	expect_refused(fd, "identify into a kernel address", NVME_IOCTL_ADMIN_CMD, &cmd, efault, 0);

	/* A data length no transfer can have, from a real buffer (without an address nvme-core
	 * sends the command without data, whatever the length). */
	cmd.addr = (uint64_t)(uintptr_t)buf;
	cmd.data_len = 0xffffffff;
	expect_refused(fd, "identify with a 4 GiB length", NVME_IOCTL_ADMIN_CMD, &cmd, any, 0);

	/* Unknown admin opcode, no data: the controller answers Invalid Opcode. */
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = 0xbf;
	expect_refused(fd, "unknown admin opcode", NVME_IOCTL_ADMIN_CMD, &cmd, any, 1);

	/* A metadata buffer pointer that is not valid, with a metadata length. */
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = 0x02;
	cmd.nsid = 1;
	cmd.metadata = 0x20;
	cmd.metadata_len = 8;
	cmd.addr = 0x30;
	cmd.data_len = 512;
	expect_refused(fd, "read into bad data and metadata pointers", NVME_IOCTL_IO_CMD, &cmd,
		       any, 1);

	/* Unknown I/O opcode on namespace 1. */
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = 0xfe;
	cmd.nsid = 1;
	expect_refused(fd, "unknown I/O opcode", NVME_IOCTL_IO_CMD, &cmd, any, 1);

	close(fd);
	printf("%d unexpected\n", failures);
	return failures ? 1 : 0;
}
