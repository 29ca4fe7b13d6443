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

#endif /* AF_SCI_SYS_PCI_H */
