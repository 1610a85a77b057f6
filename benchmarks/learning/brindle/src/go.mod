module example.com/brindle

go 1.22
