/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, PCI: pci_register_driver() and the static inlines of linux/pci.h
 * that the PCI driver wrapper (rust/sys/pci.rs) needs.
 */
#ifndef AF_SCI_SYS_PCI_H
#define AF_SCI_SYS_PCI_H

#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/pci.h>
#include <linux/workqueue.h>

int sci_pci_register_driver(struct pci_driver *drv);
resource_size_t sci_pci_resource_start(struct pci_dev *pdev, int bar);
resource_size_t sci_pci_resource_len(struct pci_dev *pdev, int bar);
void sci_pci_set_drvdata(struct pci_dev *pdev, void *data);
void *sci_pci_get_drvdata(struct pci_dev *pdev);
const char *sci_pci_name(const struct pci_dev *pdev);
struct pci_driver *sci_pci_driver_of(struct pci_dev *pdev);	/* to_pci_driver(dev.driver) */

/*
 * struct pages for memory BAR bar (ZONE_DEVICE, MEMORY_DEVICE_GENERIC: cached, mapped in
 * the direct map like RAM), so that its bytes can be page frags of socket buffers. Bound
 * to the driver (devm): they go after the driver's remove() returned. 0, or -errno
 * (-EOPNOTSUPP on a kernel without CONFIG_ZONE_DEVICE).
 */
int sci_pci_bar_pages(struct pci_dev *pdev, int bar);

/*
 * An interrupt in three stages (rust/sys/pci.rs, ThreadedIrq). The hard-IRQ half only
 * queues a BH work item (system_bh_highpri_wq: softirq context, on this CPU, right after
 * the interrupt returns); the work runs softirq(data) and, if that returns true, wakes
 * the IRQ's thread, which runs thread(data) in process context. So what needs no sleeping
 * lock (a doorbell waking a socket) costs no context switch, and what does (a control
 * frame) still gets the thread. sci_irq_free() frees the IRQ (waiting for a running
 * handler and thread), then cancels the work and waits for a running one.
 */
struct sci_irq {
	struct work_struct bh;
	unsigned int irq;
	void *data;
	bool (*softirq)(void *data);
	void (*thread)(void *data);
};

int sci_irq_request(struct sci_irq *s, unsigned int irq, const char *name, void *data,
		    bool (*softirq)(void *data), void (*thread)(void *data));
void sci_irq_free(struct sci_irq *s);

#endif /* AF_SCI_SYS_PCI_H */
