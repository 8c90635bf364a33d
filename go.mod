module stormguard

go 1.26
