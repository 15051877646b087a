"""Every write of the annotations app (HackSoft style: ``<entity>_<action>``)."""
