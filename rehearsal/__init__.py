"""The class rehearsal: a render played on a twin of its cluster (twin.py; the control plane's and KWOK's Go modules in
controlplane/ and kwok/), Karpenter's part (karpenter.py), a class day (class_day.py) with the class CronJobs
(cron_jobs.py), the hub's user-scheduler (user_scheduler_process.py) and learner pods (learner_pods.py), applied
(apply.py) and reported (report.py); run.py runs it (`python -m tools.rehearse`)."""
