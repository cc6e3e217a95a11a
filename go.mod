module github.com/rota-hpc/rota

go 1.23
