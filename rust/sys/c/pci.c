// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, pci: see pci.h. No logic lives here. */
#include <linux/memremap.h>
#include "pci.h"

int sci_pci_register_driver(struct pci_driver *drv)
{
	return pci_register_driver(drv);
}

resource_size_t sci_pci_resource_start(struct pci_dev *pdev, int bar)
{
	return pci_resource_start(pdev, bar);
}

resource_size_t sci_pci_resource_len(struct pci_dev *pdev, int bar)
{
	return pci_resource_len(pdev, bar);
}

void sci_pci_set_drvdata(struct pci_dev *pdev, void *data) { pci_set_drvdata(pdev, data); }
void *sci_pci_get_drvdata(struct pci_dev *pdev) { return pci_get_drvdata(pdev); }
const char *sci_pci_name(const struct pci_dev *pdev) { return pci_name(pdev); }
struct pci_driver *sci_pci_driver_of(struct pci_dev *pdev) { return to_pci_driver(pdev->dev.driver); }

int sci_pci_bar_pages(struct pci_dev *pdev, int bar)
{
#if IS_ENABLED(CONFIG_ZONE_DEVICE)
	struct dev_pagemap *pgmap;
	void *addr;

	pgmap = devm_kzalloc(&pdev->dev, sizeof(*pgmap), GFP_KERNEL);
	if (!pgmap)
		return -ENOMEM;
	pgmap->type = MEMORY_DEVICE_GENERIC;
	pgmap->range.start = pci_resource_start(pdev, bar);
	pgmap->range.end = pci_resource_end(pdev, bar);
	pgmap->nr_range = 1;
	addr = devm_memremap_pages(&pdev->dev, pgmap);
	if (IS_ERR(addr)) {
		devm_kfree(&pdev->dev, pgmap);
		return PTR_ERR(addr);
	}
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

static irqreturn_t sci_irq_hard(int irq, void *dev_id)
{
	struct sci_irq *s = dev_id;

	queue_work(system_bh_highpri_wq, &s->bh);
	return IRQ_HANDLED;
}

static void sci_irq_bh(struct work_struct *work)
{
	struct sci_irq *s = container_of(work, struct sci_irq, bh);

	if (s->softirq(s->data))
		irq_wake_thread(s->irq, s);
}

static irqreturn_t sci_irq_thread(int irq, void *dev_id)
{
	struct sci_irq *s = dev_id;

	s->thread(s->data);
	return IRQ_HANDLED;
}

int sci_irq_request(struct sci_irq *s, unsigned int irq, const char *name, void *data,
		    bool (*softirq)(void *data), void (*thread)(void *data))
{
	INIT_WORK(&s->bh, sci_irq_bh);
	s->irq = irq;
	s->data = data;
	s->softirq = softirq;
	s->thread = thread;
	return request_threaded_irq(irq, sci_irq_hard, sci_irq_thread, 0, name, s);
}

void sci_irq_free(struct sci_irq *s)
{
	free_irq(s->irq, s);
	cancel_work_sync(&s->bh);
}
