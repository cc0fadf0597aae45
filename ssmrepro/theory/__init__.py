"""Library (theory): closed-form results of the papers (recall laws, designed circuits)."""
