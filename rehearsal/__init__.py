"""The class rehearsal: a render played on a twin of its cluster (twin.py; twins.py picks and builds the control plane
of the stack's Kubernetes minor version, a Go module per minor in controlplane/<minor>/; KWOK's module in kwok/),
Karpenter's part (karpenter.py), a class day (class_day.py) with the class CronJobs (cron_jobs.py), the hub's
user-scheduler (user_scheduler_process.py) and learner pods (learner_pods.py), applied (apply.py) and reported
(report.py); run.py runs it (`python -m tools.rehearse`)."""
